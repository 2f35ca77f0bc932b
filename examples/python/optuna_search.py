"""Optuna drives reel trials on the real shards with reel.optuna: TPE suggests the learning rate
and the number of experts, each evaluation is reported to the trial, and the median pruner stops
unpromising runs after that step (docs/python.md, "Search with Optuna").

Run from the repository root after building (docs/python.md):
    PYTHONPATH=build/python python3 examples/python/optuna_search.py
"""

import optuna

import reel.optuna

space = {
    "trainer.learning_rate.base": {"low": 1e-3, "high": 3e-2, "log": True},
    "model.options.experts": (1, 4),
}
objective = reel.optuna.objective("configs/moe.pbtxt", space,
                                  overrides={"trainer.steps": 60, "trainer.eval_every_steps": 20})
study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=1),
                            pruner=optuna.pruners.MedianPruner(n_startup_trials=2))
study.optimize(objective, n_trials=6)
print("best GAP@20", round(study.best_value, 4), "with", study.best_params)
print(study.trials_dataframe()[["number", "value", "state", "params_trainer.learning_rate.base",
                                "params_model.options.experts"]])
