"""reel.train stops on a non-finite loss or gradient (trainer.stop_on_nonfinite, docs/training.md)."""

import math
import re

import pytest

import reel
from conftest import moe_config, run_reel


@pytest.fixture(scope="module")
def video_data(tmp_path_factory):
    """48 train and 16 test videos of 8 classes, video level: checkpoints of a few kB."""
    root = tmp_path_factory.mktemp("nonfinite")
    for part, videos, seed in (("train", 48, 1), ("test", 16, 2)):
        run_reel("synth", "--out", root / part, "--videos", videos, "--classes", 8, "--level",
                 "video", "--shards", 1, "--seed", seed)
    return root


def diverging(data, workdir):
    """A sane learning rate for 3 steps, then one past the float range (a staircase): step 4's
    update makes the parameters infinite from finite gradients, so its checkpoint is refused."""
    cfg = moe_config(data / "train" / "*.tfrecord", data / "test" / "*.tfrecord", workdir,
                     classes=8, steps=6)
    cfg["trainer"].update(batch_size=8, checkpoint_every_steps=1, keep_checkpoints=0,
                          learning_rate={"base": 0.005, "schedule": "exponential",
                                         "decay_steps": 3, "decay_rate": 1e41})
    return cfg


def test_a_diverging_run_stops_at_its_step_and_resumes_from_the_last_finite_checkpoint(
        video_data, tmp_path):
    cfg = diverging(video_data, tmp_path)
    with pytest.raises(reel.FailedPreconditionError) as stopped:
        reel.train(cfg)
    message = str(stopped.value)
    assert "training stopped at step 4: the parameters it made are not finite" in message
    assert "(step 3), is intact and --resume starts from it" in message
    checkpoints = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert checkpoints == [f"ckpt-000000000{s}.reelckpt" for s in (1, 2, 3)], checkpoints
    sane = {"trainer.learning_rate.schedule": "constant"}
    resumed = reel.train(cfg, overrides=sane, resume=True)
    assert resumed.resumed and resumed.steps == 6 and resumed.steps_this_run == 3
    assert math.isfinite(resumed.final_loss)


def test_a_non_finite_loss_names_its_step(video_data, tmp_path):
    # Adam moves every weight by about the learning rate in its first step, so at 1e36 the
    # weights stay finite and the second step's logits overflow the float range.
    cfg = diverging(video_data, tmp_path)
    cfg["trainer"]["learning_rate"] = {"base": 1e36}
    with pytest.raises(reel.FailedPreconditionError,
                       match=r"training stopped at step 2: the loss is \S+ on rank 0 .*"
                             r"\(step 1\), is intact"):
        reel.train(cfg)


def test_opt_out_trains_on(video_data, tmp_path):
    cfg = diverging(video_data, tmp_path)
    cfg["trainer"]["stop_on_nonfinite"] = False
    del cfg["eval_data"]  # the metrics refuse NaN scores (docs/metrics.md)
    result = reel.train(cfg)
    assert result.steps == 6
    assert not math.isfinite(result.final_loss)


def test_reel_train_exits_1_naming_the_step_and_resumes(video_data, tmp_path):
    config = tmp_path / "diverging.pbtxt"
    config.write_text(f"""
data {{
  name: "tfrecord"
  options {{ key: "files" value: "{video_data / 'train' / '*.tfrecord'}" }}
  options {{ key: "level" value: "video" }}
}}
model {{ name: "logistic" }}
optimizer {{ name: "sync" options {{ key: "rule" value: "adam" }} }}
trainer {{
  steps: 6 batch_size: 8 seed: 1 num_classes: 8 checkpoint_every_steps: 1
  learning_rate {{ base: 0.005 schedule: "exponential" decay_steps: 3 decay_rate: 1e41 }}
  checkpoint_dir: "{tmp_path / 'checkpoints'}"
}}
""")
    stopped = run_reel("train", "--config", config, check=False)
    assert stopped.returncode == 1, stopped.stderr
    assert "reel train: FAILED_PRECONDITION: training stopped at step 4: " in stopped.stderr
    resumed = run_reel("train", "--config", config, "--resume",
                       "--set", "trainer.learning_rate.schedule=constant")
    assert "at step 3" in resumed.stdout + resumed.stderr
    assert re.search(r"trained \d+ steps", resumed.stdout), resumed.stdout
