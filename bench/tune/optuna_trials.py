#!/usr/bin/env python3
"""The Optuna side of optuna_vs_asha.py: one study over configs/tune_moe.pbtxt's space with
Optuna's TPE sampler and successive-halving pruner, each trial reel.train (the Python module) on
the search's base config. Prints one JSON line: the (epochs spent, GAP@20) of every report in the
order they happened, the trials run and how many were pruned."""
import argparse
import json
import math
import os
import threading

import optuna
import reel

from optuna_vs_asha import MAX_EPOCHS, PARALLEL, RUNG_EPOCHS, SPACE, ETA, TRIALS


def base_config(path):
    text = open(path).read()
    body = text[text.index("base {") + len("base {"):text.index("dimension {")]
    return body[:body.rindex("}")]  # the RunConfig inside `base { ... }`


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workdir", required=True)
    a = p.parse_args()
    base = base_config(a.config)
    train_files = "data/yt8m/validate000[01].tfrecord"  # the base config's data
    assert train_files in base, "the base config's training data changed"
    videos = sum(1 for _ in reel.read_tfrecords(train_files))
    lock = threading.Lock()
    curve = []  # (epochs spent by the whole search, GAP@20), in report order
    spent = [0]

    def objective(trial):
        params = {field: trial.suggest_categorical(field, values) for field, values in SPACE.items()}
        steps_per_epoch = math.ceil(videos / int(params["trainer.batch_size"]))  # partial batches too
        overrides = dict(params)
        overrides["trainer.eval_every_steps"] = RUNG_EPOCHS * steps_per_epoch
        overrides["trainer.epochs"] = MAX_EPOCHS
        state = {"epoch": 0, "pruned": False}

        def on_event(event):
            if event["kind"] != "eval" or state["pruned"]:
                return state["pruned"]
            epoch = min(MAX_EPOCHS, math.ceil(event["step"] / steps_per_epoch))
            gap = event["eval"]["gap"]
            with lock:
                spent[0] += epoch - state["epoch"]
                curve.append((spent[0], gap))
            state["epoch"] = epoch
            trial.report(gap, epoch)
            state["pruned"] = trial.should_prune()
            return state["pruned"]  # True stops the run after this step

        result = reel.train(base, overrides, [on_event])
        if state["pruned"]:
            raise optuna.TrialPruned()
        if state["epoch"] != MAX_EPOCHS:
            raise RuntimeError(f"trial {trial.number} ended at epoch {state['epoch']}: {result}")
        return result.evals[-1]["gap"]

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    os.makedirs(a.workdir, exist_ok=True)
    study = optuna.create_study(
        direction="maximize", sampler=optuna.samplers.TPESampler(seed=a.seed),
        pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=RUNG_EPOCHS,
                                                      reduction_factor=ETA,
                                                      min_early_stopping_rate=0))
    study.optimize(objective, n_trials=TRIALS, n_jobs=PARALLEL)
    states = [t.state for t in study.trials]
    print(json.dumps({"curve": curve, "trials": len(study.trials),
                      "pruned": states.count(optuna.trial.TrialState.PRUNED),
                      "complete": states.count(optuna.trial.TrialState.COMPLETE),
                      "best": study.best_value, "best_params": study.best_params}))


if __name__ == "__main__":
    main()
