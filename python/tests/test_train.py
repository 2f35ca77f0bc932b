"""reel.train: the command's trainer from Python, its callbacks, result, GIL and Ctrl-C."""

import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import reel
from conftest import ROOT, SHARDS, moe_config, run_reel

TRAIN = SHARDS / "validate000[01].tfrecord"
TEST = SHARDS / "validate0002.tfrecord"


def test_same_final_loss_as_reel_train_with_the_same_config_and_seed(tmp_path):
    common = ["trainer.steps=6", "trainer.log_every_steps=3", "trainer.metrics_log=",
              "trainer.tensorboard_dir="]
    cli = run_reel("train", "--config", "configs/logistic.pbtxt",
                   *sum((["--set", s] for s in common), []),
                   "--set", f"trainer.checkpoint_dir={tmp_path / 'cli'}")
    want = float(re.search(r"final loss (\S+)", cli.stdout).group(1))
    overrides = dict(s.split("=", 1) for s in common)
    overrides["trainer.checkpoint_dir"] = str(tmp_path / "py")
    result = reel.train(ROOT / "configs" / "logistic.pbtxt", overrides=overrides)
    assert f"{result.final_loss:.4f}" == f"{want:.4f}"
    steps = int(re.search(r"trained (\d+) steps", cli.stdout).group(1))
    assert result.steps == steps
    assert result.checkpoint.startswith(str(tmp_path / "py"))
    cli_gap = float(re.search(r"eval: GAP@20 (\S+)", cli.stdout).group(1))
    assert f"{result.final_eval['gap']:.4f}" == f"{cli_gap:.4f}"


def test_callbacks_see_logs_and_evals_and_metrics_frame(tmp_path):
    cfg = moe_config(TRAIN, TEST, tmp_path, steps=12, checkpoints=False)
    cfg["trainer"]["eval_every_steps"] = 8
    seen = []
    result = reel.train(cfg, callbacks=[seen.append])
    assert [e["step"] for e in seen if e["kind"] == "log"] == [4, 8, 12]
    assert [e["step"] for e in seen if e["kind"] == "eval"] == [8, 12]
    assert result.steps == 12 and not result.stopped
    assert [e["step"] for e in result.evals] == [8, 12]
    df = result.metrics
    assert list(df[df.kind == "log"].step) == [4, 8, 12]
    assert df[df.kind == "log"].loss.iloc[-1] == result.final_loss
    assert df[df.kind == "eval"].eval_gap.iloc[-1] == result.final_eval["gap"]
    parts = ["data", "compute", "update", "wait", "evaluation", "checkpoint"]
    assert sorted(result.time) == sorted(parts + ["total"])
    assert result.time["compute"] > 0 and result.time["evaluation"] > 0
    assert sum(result.time[p] for p in parts) <= result.time["total"]


def test_a_callback_stops_the_run_with_a_checkpoint(tmp_path):
    cfg = moe_config(TRAIN, TEST, tmp_path, steps=1000)
    result = reel.train(cfg, callbacks=lambda e: e["step"] >= 8)
    assert result.stopped
    assert result.steps == 8
    assert result.checkpoint and (tmp_path / "checkpoints").is_dir()
    resumed = reel.train(cfg, overrides={"trainer.steps": 12}, resume=True)
    assert resumed.resumed and resumed.steps == 12 and resumed.steps_this_run == 4


def test_a_callback_exception_stops_the_run_and_is_raised(tmp_path):
    def boom(event):
        raise RuntimeError("pruned by test")

    with pytest.raises(RuntimeError, match="pruned by test"):
        reel.train(moe_config(TRAIN, TEST, tmp_path, steps=1000, checkpoints=False),
                   callbacks=[boom])


def test_trains_on_synthetic_frame_data(frame_data, tmp_path):
    cfg = moe_config(frame_data / "train" / "*.tfrecord", frame_data / "test" / "*.tfrecord",
                     tmp_path, level="frame", classes=8, steps=6, features="rgb,audio",
                     model="moe", checkpoints=False)
    result = reel.train(cfg)
    assert result.steps == 6
    assert result.final_eval["videos"] == 16


def test_python_threads_run_while_training(tmp_path):
    ticks = []
    done = threading.Event()

    def ticker():
        while not done.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    t = threading.Thread(target=ticker)
    cfg = moe_config(TRAIN, TEST, tmp_path, steps=20, checkpoints=False)
    cfg["trainer"]["log_every_steps"] = 1000  # no event: nothing in the run takes the GIL
    t.start()
    try:
        time.sleep(0.05)
        start = time.monotonic()
        reel.train(cfg)
        end = time.monotonic()
    finally:
        done.set()
        t.join()
    during = [x for x in ticks if start < x < end]
    # Holding the GIL, train() would let the ticker run only around the call; released, it ticks
    # about every millisecond of the run.
    assert len(during) >= 20, f"{len(during)} ticks in {end - start:.2f} s of training"


CHILD = textwrap.dedent("""
    import sys, reel
    cfg = {cfg!r}
    def first(event):
        print("training", flush=True)
    try:
        reel.train(cfg, callbacks=[first])
    except KeyboardInterrupt as e:
        print("KeyboardInterrupt:", e, flush=True)
        sys.exit(0)
    print("finished without interruption", flush=True)
""")


def test_sigint_writes_a_checkpoint_and_raises_keyboard_interrupt(tmp_path):
    cfg = moe_config(TRAIN, TEST, tmp_path, steps=1_000_000)
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(cfg=cfg)], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "training"
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=300)
    assert child.returncode == 0, err
    assert "KeyboardInterrupt: interrupted at step" in out
    checkpoints = list((tmp_path / "checkpoints").iterdir())
    assert checkpoints, "no checkpoint written"
    assert str(checkpoints[0].name) in out


def test_bad_inputs_raise_and_write_nothing(tmp_path):
    cfg = moe_config(TRAIN, TEST, tmp_path, steps=4)
    with pytest.raises(FileNotFoundError, match="no-such.pbtxt"):
        reel.train(tmp_path / "no-such.pbtxt")
    with pytest.raises(ValueError, match="no_such_field"):
        reel.train(cfg, overrides={"trainer.no_such_field": 1})
    bad_model = moe_config(TRAIN, TEST, tmp_path, steps=4)
    bad_model["model"]["options"]["no_such_option"] = 3
    with pytest.raises(ValueError, match="no_such_option"):
        reel.train(bad_model)
    with pytest.raises(ValueError, match="no_such_field"):
        reel.train("trainer { no_such_field: 1 }")
    missing = moe_config(SHARDS / "none*.tfrecord", TEST, tmp_path, steps=4)
    with pytest.raises(FileNotFoundError):
        reel.train(missing)
    with pytest.raises(TypeError, match="config"):
        reel.train(42)
    with pytest.raises(TypeError, match="overrides"):
        reel.train(cfg, overrides=["trainer.steps=3"])
    with pytest.raises(TypeError, match=r"callbacks\[0\]"):
        reel.train(cfg, callbacks=[3])
    assert not (tmp_path / "checkpoints").exists()
