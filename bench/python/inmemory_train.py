"""One timed reel.train for bench/python/inmemory.sh: MODE (files | arrays) on the frame-level
TFRecords in DATA. `arrays` reads them into NumPy first (not timed), then trains from memory;
`files` trains from the files. Timed: the reel.train call, start to end."""
import sys
import time

import numpy as np

import reel

mode, data = sys.argv[1], sys.argv[2]
config = {
    "data": {"name": "tfrecord", "options": {"files": data + "/*.tfrecord", "level": "frame",
                                             "max_frames": 300, "shuffle_buffer": 0}},
    "model": {"name": "two_stream", "options": {"video_hidden": 32, "audio_hidden": 16}},
    "optimizer": {"name": "sync", "options": {"rule": "adam"}},
    "trainer": {"epochs": 1, "batch_size": 32, "seed": 1, "num_classes": 16,
                "learning_rate": {"base": 0.001}, "log_every_steps": 0, "checkpoint_dir": ""},
}
kwargs = {}
if mode == "arrays":
    recs = list(reel.read_tfrecords(data + "/*.tfrecord", level="frame"))
    kwargs["data"] = {"rgb": [np.array(r["rgb"]) for r in recs],
                      "audio": [np.array(r["audio"]) for r in recs],
                      "labels": [np.array(r["labels"]) for r in recs]}
elif mode != "files":
    sys.exit(f"usage: inmemory_train.py files|arrays DATA, not {mode!r}")
start = time.perf_counter()
r = reel.train(config, **kwargs)
wall = time.perf_counter() - start
print(f"mode={mode} steps={r.steps} examples={r.examples} final_loss={r.final_loss:.6f} "
      f"wall={wall:.3f} examples_per_sec={r.examples / wall:.1f}")
