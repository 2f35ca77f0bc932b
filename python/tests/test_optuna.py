"""reel.optuna: Optuna's TPE sampler and median pruner driving reel.train on the real shards."""

import optuna
import pytest

import reel
import reel.optuna
from conftest import SHARDS, moe_config

TRAIN = SHARDS / "validate000[01].tfrecord"
TEST = SHARDS / "validate0002.tfrecord"


def one_epoch(tmp_path):
    cfg = moe_config(TRAIN, TEST, tmp_path, checkpoints=False)
    cfg["trainer"].update({"steps": 0, "epochs": 1, "batch_size": 64, "eval_every_steps": 3})
    return cfg


def test_tpe_and_median_pruner_prune_a_bad_trial_and_complete_the_others(tmp_path):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = {"trainer.learning_rate.base": {"low": 1e-7, "high": 3e-2, "log": True},
             "trainer.clip_norm": [0.0, 1.0]}
    study = optuna.create_study(direction="maximize",
                                sampler=optuna.samplers.TPESampler(seed=1),
                                pruner=optuna.pruners.MedianPruner(n_startup_trials=1))
    # A sound run first, then one whose learning rate barely moves the weights: at its first
    # evaluation it is below the median of the finished trial at that step, so it is pruned.
    # Then one trial TPE draws.
    study.enqueue_trial({"trainer.learning_rate.base": 0.01, "trainer.clip_norm": 0.0})
    study.enqueue_trial({"trainer.learning_rate.base": 1e-7, "trainer.clip_norm": 0.0})
    objective = reel.optuna.objective(one_epoch(tmp_path), space,
                                      overrides={"trainer.clip_norm": 5.0})
    study.optimize(objective, n_trials=3)
    first, second, third = study.trials
    assert first.state == optuna.trial.TrialState.COMPLETE
    steps = sorted(first.intermediate_values)
    assert len(steps) >= 2 and steps[0] == 3, "an evaluation every 3 steps, each reported"
    assert first.value == first.intermediate_values[steps[-1]], "the final evaluation's GAP"
    assert first.user_attrs["steps"] == steps[-1]
    assert 0 < first.value < 1
    assert second.state == optuna.trial.TrialState.PRUNED
    assert sorted(second.intermediate_values) == [3], "stopped at its first evaluation"
    assert second.intermediate_values[3] < first.intermediate_values[3]
    assert third.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    assert 1e-7 <= third.params["trainer.learning_rate.base"] <= 3e-2
    assert not list(tmp_path.iterdir()), "workdir None: the trials wrote nothing"


def test_a_trial_with_a_workdir_keeps_its_checkpoint(tmp_path):
    cfg = moe_config(TRAIN, TEST, tmp_path, steps=2, checkpoints=False)
    study = optuna.create_study(direction="maximize")
    study.optimize(reel.optuna.objective(cfg, {"trainer.clip_norm": (0.0, 1.0)}, prune=False,
                                         workdir=tmp_path / "trials", metric="hit_at_1"),
                   n_trials=1)
    trial = study.trials[0]
    assert trial.state == optuna.trial.TrialState.COMPLETE
    assert 0 <= trial.value <= 1 and not trial.intermediate_values
    assert trial.user_attrs["checkpoint"].startswith(str(tmp_path / "trials" / "trial-0"))
    assert (tmp_path / "trials" / "trial-0" / "metrics.jsonl").is_file()


def test_suggest_draws_each_kind_of_space():
    trial = optuna.trial.FixedTrial({"a": 3, "b": 0.5, "c": "x", "d": 2, "e": 0.25})
    d = optuna.distributions
    got = reel.optuna.suggest(trial, {"a": (1, 5), "b": (0.0, 1.0), "c": ["x", "y"],
                                      "d": d.IntDistribution(1, 4),
                                      "e": {"low": 0.1, "high": 1.0, "log": True}})
    assert got == {"a": 3, "b": 0.5, "c": "x", "d": 2, "e": 0.25}


def test_bad_inputs_are_clear_errors_before_any_training(tmp_path):
    trial = optuna.trial.FixedTrial({"a": 1})
    with pytest.raises(TypeError, match="space"):
        reel.optuna.suggest(trial, {})
    with pytest.raises(TypeError, match=r"space\['a'\]"):
        reel.optuna.suggest(trial, {"a": 3})
    with pytest.raises(ValueError, match=r"space\['a'\]: a range"):
        reel.optuna.suggest(trial, {"a": {"low": 1}})
    with pytest.raises(ValueError, match="empty list"):
        reel.optuna.suggest(trial, {"a": []})
    with pytest.raises(ValueError, match="metric must be one of gap"):
        reel.optuna.objective({}, {"a": [1]}, metric="loss")
    with pytest.raises(TypeError, match="prune"):
        reel.optuna.objective({}, {"a": [1]}, prune="yes")
    # A config without eval_data: the trial fails with reel's error, the study goes on.
    cfg = moe_config(TRAIN, TEST, tmp_path, steps=2, checkpoints=False)
    del cfg["eval_data"]
    study = optuna.create_study(direction="maximize")
    study.optimize(reel.optuna.objective(cfg, {"trainer.clip_norm": [0.0]}), n_trials=1,
                   catch=(Exception,))
    assert study.trials[0].state == optuna.trial.TrialState.FAIL
    assert not list(tmp_path.iterdir())
