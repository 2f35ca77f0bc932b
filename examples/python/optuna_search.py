"""Optuna drives reel trials on the real shards, pruning unpromising runs from the training
callbacks (each evaluation is reported; a pruned run stops after that step).

Run from the repository root after building (docs/python.md):
    PYTHONPATH=build/python python3 examples/python/optuna_search.py
"""

import optuna

import reel


def objective(trial):
    overrides = {
        "trainer.learning_rate.base": trial.suggest_float("lr", 1e-3, 3e-2, log=True),
        "model.options.experts": trial.suggest_int("experts", 1, 4),
        "trainer.steps": 60, "trainer.eval_every_steps": 20,
        "trainer.checkpoint_dir": "",  # a trial keeps no checkpoint
        "trainer.metrics_log": "", "trainer.tensorboard_dir": "",
    }

    def report(event):
        if event["kind"] == "eval":
            trial.report(event["eval"]["gap"], event["step"])
            return trial.should_prune()  # True stops the run
        return False

    result = reel.train("configs/moe.pbtxt", overrides=overrides, callbacks=[report])
    if result.stopped:
        raise optuna.TrialPruned()
    return result.final_eval["gap"]


study = optuna.create_study(direction="maximize",
                            pruner=optuna.pruners.MedianPruner(n_startup_trials=2))
study.optimize(objective, n_trials=6)
print("best GAP@20", round(study.best_value, 4), "with", study.best_params)
print(study.trials_dataframe()[["number", "value", "state", "params_lr", "params_experts"]])
