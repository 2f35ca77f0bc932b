"""Stopping reel.train from outside: SIGTERM at each stage of a run, a handler of the user's, calls
in several threads each with its own stop, and srun's tasks forming one group (docs/python.md,
"Stopping a run" and "Several processes")."""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import reel
from conftest import ROOT, SHARDS, moe_config

TRAIN = SHARDS / "validate000[01].tfrecord"
TEST = SHARDS / "validate0002.tfrecord"
TERMINATED = "reel.errors.Terminated: terminated (SIGTERM) at step "

# A child that trains without end; `body` says when SIGTERM comes. It prints "training" at its
# first event, then what train() raised.
CHILD = textwrap.dedent("""
    import os, signal, sys, threading
    import reel
    cfg = {cfg!r}
    term = lambda: os.kill(os.getpid(), signal.SIGTERM)
    {body}
""")


def child(tmp_path, body, log_every=4, eval_every=0):
    cfg = moe_config(TRAIN, TEST, tmp_path, steps=1_000_000)
    cfg["trainer"]["log_every_steps"] = log_every
    cfg["trainer"]["eval_every_steps"] = eval_every
    code = CHILD.format(cfg=cfg, body=textwrap.dedent(body))
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(p):
    out, err = p.communicate(timeout=300)
    return p.returncode, out, err


def checkpoints(tmp_path):
    d = tmp_path / "checkpoints"
    return sorted(f.name for f in d.iterdir()) if d.is_dir() else []


def resumes(tmp_path, steps):
    """The newest checkpoint continues: a run resumed from it trains on to `steps`."""
    cfg = moe_config(TRAIN, TEST, tmp_path, steps=1)
    cfg["trainer"]["steps"] = steps
    r = reel.train(cfg, resume=True)
    assert r.resumed and r.steps == steps
    return r


def stopped_step(err):
    assert TERMINATED in err, err
    return int(err.split(TERMINATED)[1].split(";")[0])


def test_sigterm_mid_training_writes_the_checkpoint_then_raises_terminated(tmp_path):
    p = child(tmp_path, """
        reel.train(cfg, callbacks=lambda e: print("training", flush=True))
    """)
    assert p.stdout.readline().strip() == "training"
    p.send_signal(signal.SIGTERM)
    code, out, err = finish(p)
    assert code == 1, err  # an uncaught Terminated, not death by the signal (-15)
    step = stopped_step(err)
    assert step >= 4
    newest = checkpoints(tmp_path)[-1]
    assert f"checkpoint {tmp_path / 'checkpoints' / newest} (continue with resume=True)" in err
    assert ".tmp" not in newest
    resumes(tmp_path, step + 2)


def test_sigterm_before_the_first_step(tmp_path):
    # The stop object is asked once before the run starts: its SIGTERM arrives before any step.
    p = child(tmp_path, """
        class TermOnce:
            sent = False
            def is_set(self):
                if not self.sent:
                    self.sent = True
                    term()
                return False
        reel.train(cfg, stop=TermOnce())
    """)
    code, out, err = finish(p)
    assert code == 1, err
    assert stopped_step(err) == 0
    assert checkpoints(tmp_path) == ["ckpt-0000000000.reelckpt"]
    resumes(tmp_path, 2)


def test_a_second_sigterm_during_the_checkpoint_finishes_it(tmp_path):
    # No periodic log: the only log event is the last window's, which the trainer reports after
    # it stopped and before it writes the checkpoint; the second TERM is sent there.
    p = child(tmp_path, """
        def on(e):
            print(e["kind"], e["step"], flush=True)
            if e["kind"] == "eval" or e["kind"] == "log":
                term()
        reel.train(cfg, callbacks=on)
    """, log_every=0, eval_every=4)
    code, out, err = finish(p)
    assert code == 1, err
    assert out.splitlines()[0] == "eval 4" and out.splitlines()[-1].startswith("log ")
    assert "reel: already stopping: finishing the step and the checkpoint" in err
    step = stopped_step(err)
    assert checkpoints(tmp_path) == [f"ckpt-{step:010d}.reelckpt"]
    resumes(tmp_path, step + 2)


def test_sigterm_while_a_periodic_checkpoint_is_written(tmp_path):
    # TERM as soon as a checkpoint's temporary file shows; if the write was quicker than the look,
    # it lands mid-training instead: either way the newest checkpoint is whole and continues.
    cfg = moe_config(TRAIN, TEST, tmp_path, steps=1_000_000)
    cfg["trainer"]["checkpoint_every_steps"] = 2
    code = CHILD.format(cfg=cfg, body="reel.train(cfg)")
    p = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    d = tmp_path / "checkpoints"
    while p.poll() is None and not (d.is_dir() and any(".tmp-" in f.name for f in d.iterdir())):
        time.sleep(0.001)
    p.send_signal(signal.SIGTERM)
    code, out, err = finish(p)
    assert code == 1, err
    step = stopped_step(err)
    assert checkpoints(tmp_path)[-1] == f"ckpt-{step:010d}.reelckpt"
    resumes(tmp_path, step + 2)


def test_a_handler_of_the_users_keeps_sigterm_and_stops_the_run_by_raising(tmp_path):
    p = child(tmp_path, """
        def mine(sig, frame):
            raise SystemExit("my handler ran")
        signal.signal(signal.SIGTERM, mine)
        try:
            reel.train(cfg, callbacks=lambda e: print("training", flush=True))
        finally:
            print("handler after:", signal.getsignal(signal.SIGTERM) is mine, flush=True)
    """)
    assert p.stdout.readline().strip() == "training"
    p.send_signal(signal.SIGTERM)
    code, out, err = finish(p)
    assert code == 1 and "my handler ran" in err, err
    assert "handler after: True" in out
    assert checkpoints(tmp_path), "the run did not write its checkpoint before raising"


def test_after_a_call_sigterm_is_the_default_again(tmp_path):
    p = child(tmp_path, """
        cfg["trainer"]["steps"] = 2
        reel.train(cfg)
        print("trained", flush=True)
        term()
        print("still alive", flush=True)
    """)
    code, out, err = finish(p)
    assert code == -signal.SIGTERM, err
    assert "trained" in out and "still alive" not in out


def test_a_signal_stops_every_call_in_flight_and_a_later_call_runs_on(tmp_path):
    p = child(tmp_path, """
        import copy
        other = copy.deepcopy(cfg)
        other["trainer"]["checkpoint_dir"] += "-thread"
        started = threading.Barrier(3)
        def run(c, name):
            first = []
            def on(e):
                if not first:
                    first.append(1)
                    started.wait()
            try:
                reel.train(c, callbacks=on)
            except reel.Terminated as e:
                print(name, "Terminated:", e, flush=True)
        t = threading.Thread(target=run, args=(other, "thread"))
        t.start()
        threading.Thread(target=lambda: (started.wait(), print("training", flush=True))).start()
        run(cfg, "main")
        t.join()
        # A signal of an earlier call stops no later one.
        cfg["trainer"]["steps"] = 2
        cfg["trainer"]["checkpoint_dir"] = ""
        print("later:", reel.train(cfg).steps, flush=True)
    """)
    assert p.stdout.readline().strip() == "training"
    p.send_signal(signal.SIGTERM)
    code, out, err = finish(p)
    assert code == 0, err
    assert "main Terminated: terminated (SIGTERM) at step" in out
    assert "thread Terminated: terminated (SIGTERM) at step" in out
    assert "later: 2" in out
    assert checkpoints(tmp_path) and list((tmp_path / "checkpoints-thread").iterdir())


def test_calls_in_two_threads_are_stopped_each_by_its_own_event(tmp_path):
    results, errors = {}, []
    stops = {"a": threading.Event(), "b": threading.Event()}

    def run(name, steps):
        cfg = moe_config(TRAIN, TEST, tmp_path / name, steps=steps, checkpoints=False)

        def on(e):
            if name == "a":
                stops["a"].set()  # stops this call, from any thread
        try:
            results[name] = reel.train(cfg, callbacks=on, stop=stops[name])
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=run, args=("a", 1_000_000)),
               threading.Thread(target=run, args=("b", 12))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results["a"].stopped and results["a"].steps < 1_000_000
    assert not results["b"].stopped and results["b"].steps == 12
    assert not stops["b"].is_set()


def test_a_stop_that_is_no_event_is_refused(tmp_path):
    cfg = moe_config(TRAIN, TEST, tmp_path, steps=2)
    with pytest.raises(TypeError, match="stop must be a threading.Event"):
        reel.train(cfg, stop=True)
    with pytest.raises(TypeError, match="stop must be a threading.Event"):
        reel.tune({"base": {}}, tmp_path / "tune", stop="now")
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "tune").exists()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def srun_env(rank, tasks, port):
    """What srun sets for task `rank` of a one-node step (its reserved port: `port`)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "REEL_", "OMPI_", "PMIX_", "PMI_"))}
    env.update({"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": str(rank),
                "SLURM_NTASKS": str(tasks), "SLURM_LOCALID": str(rank), "SLURM_NODEID": "0",
                "SLURM_STEP_NODELIST": "localhost", "SLURM_STEP_TASKS_PER_NODE": str(tasks),
                "SLURM_STEP_RESV_PORTS": str(port)})
    return env


SRUN_CHILD = textwrap.dedent("""
    import reel
    r = reel.train({cfg!r}, verbose=True)
    print("steps", r.steps, "examples", r.examples, "checkpoint", repr(r.checkpoint), flush=True)
""")


def test_srun_tasks_form_one_group_and_write_one_checkpoint(tmp_path):
    cfg = moe_config(TRAIN, TEST, tmp_path, steps=4)
    port = free_port()
    ps = [subprocess.Popen([sys.executable, "-c", SRUN_CHILD.format(cfg=cfg)], cwd=ROOT,
                           env=srun_env(rank, 2, port), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True) for rank in range(2)]
    done = [finish(p) for p in ps]
    for rank, (code, out, err) in enumerate(done):
        assert code == 0, err
        assert (f"reel: started by srun (job 4242, step 0): rank {rank} of 2, transport tcp, "
                f"coordinator 127.0.0.1:{port}") in err
        # One group: every step is the examples of both ranks' batches.
        assert "steps 4 examples 128 " in out, out
    lead = done[0][1]
    assert checkpoints(tmp_path) == ["ckpt-0000000004.reelckpt"]
    assert repr(str(tmp_path / "checkpoints" / "ckpt-0000000004.reelckpt")) in lead
    resumes(tmp_path, 6)


def test_an_inconsistent_srun_step_is_an_error_naming_the_variable(tmp_path):
    cfg = moe_config(TRAIN, TEST, tmp_path, steps=4)
    env = srun_env(1, 2, free_port())
    env["SLURM_STEP_TASKS_PER_NODE"] = "3"
    code = ("import reel\ntry:\n    reel.train(%r)\nexcept ValueError as e:\n    print(e)\n" % cfg)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "SLURM_STEP_TASKS_PER_NODE" in p.stdout and "adds up to 3 tasks" in p.stdout
    assert not (tmp_path / "checkpoints").exists()


def test_sigterm_stops_a_search_resumably(tmp_path):
    base = reel._config.dict_to_text(moe_config(TRAIN, TEST, tmp_path, steps=6))
    search = ("base {\n" + base + "\n}\n"
              'dimension { field: "trainer.learning_rate.base" values: ["0.001", "0.01"] }\n'
              "search { algorithm: GRID max_budget: 6 }\n")
    workdir = tmp_path / "search"
    code = textwrap.dedent(f"""
        import os, signal, reel
        class TermOnce:
            sent = False
            def is_set(self):
                if not self.sent:
                    self.sent = True
                    os.kill(os.getpid(), signal.SIGTERM)
                return False
        reel.tune({search!r}, {str(workdir)!r}, parallel=1, stop=TermOnce())
    """)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 1, p.stderr
    assert ("reel.errors.Terminated: search terminated (SIGTERM); continue with resume=True, "
            f"workdir {workdir}") in p.stderr
    result = reel.tune(search, workdir, parallel=1, resume=True)
    assert len(result.results) == 2 and result.results["ok"].all()
