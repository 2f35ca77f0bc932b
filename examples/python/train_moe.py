"""Trains moe on the real shards (configs/moe.pbtxt, shortened), then evaluates and predicts.

Run from the repository root after building (docs/python.md):
    PYTHONPATH=build/python python3 examples/python/train_moe.py
"""

import reel


def progress(event):
    if event["kind"] == "log":
        print(f"step {event['step']:4d}  loss {event['loss']:.4f}")
    else:
        print(f"eval @ step {event['step']}: GAP@20 {event['eval']['gap']:.4f}")


result = reel.train("configs/moe.pbtxt",
                    overrides={"trainer.epochs": 1, "trainer.checkpoint_dir": "runs/py-moe",
                               "trainer.metrics_log": "", "trainer.tensorboard_dir": ""},
                    callbacks=[progress])
print(result)
print(result.metrics.tail())

metrics = reel.evaluate(result.checkpoint, "data/yt8m/validate0002.tfrecord")
print("evaluate:", {k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()})
top = reel.predict(result.checkpoint, "data/yt8m/validate0002.tfrecord", top_k=3, as_frame=True)
print(top.head(6))
