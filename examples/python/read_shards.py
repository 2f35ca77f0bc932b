"""Reads the real YouTube-8M shards into NumPy: per-record dicts, then padded batches.

Run from the repository root after building (docs/python.md):
    PYTHONPATH=build/python python3 examples/python/read_shards.py
"""

import numpy as np

import reel

records = list(reel.read_tfrecords("data/yt8m/*.tfrecord", level="video"))
rgb = np.stack([r["mean_rgb"] for r in records])
labels_per_video = np.array([len(r["labels"]) for r in records])
print(f"{len(records)} videos, mean_rgb {rgb.shape}, "
      f"{labels_per_video.mean():.2f} labels per video, first id {records[0]['id']}")

for batch in reel.batches("data/yt8m/validate0000.tfrecord", batch_size=128):
    print(f"batch of {len(batch['id'])}: mean_audio {batch['mean_audio'].shape}, "
          f"{len(batch['label_ids'])} labels")
