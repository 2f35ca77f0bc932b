"""reel.tune (the command's search) and Optuna driving reel trials, pruned from callbacks."""

import optuna
import pytest

import reel
from conftest import SHARDS, moe_config

TRAIN = SHARDS / "validate000[01].tfrecord"
TEST = SHARDS / "validate0002.tfrecord"


def search_text(tmp_path):
    base = reel._config.dict_to_text(moe_config(TRAIN, TEST, tmp_path, steps=6))
    base = "\n".join("  " + line for line in base.splitlines())
    return f"""
base {{
{base}
}}
dimension {{ field: "trainer.learning_rate.base" values: ["0.001", "0.01"] }}
search {{ algorithm: GRID max_budget: 6 }}
"""


def test_tune_returns_every_trial_and_the_best_config(tmp_path):
    result = reel.tune(search_text(tmp_path), tmp_path / "search", parallel=1)
    assert len(result.results) == 2
    assert set(result.results["trainer.learning_rate.base"]) == {"0.001", "0.01"}
    assert result.results["ok"].all()
    best = result.results["metric"].max()
    assert result.best["metric"] == best
    assert (tmp_path / "search" / "best.pbtxt").is_file()
    assert result.best_config.endswith("best.pbtxt")


def test_tune_bad_inputs(tmp_path):
    with pytest.raises(FileNotFoundError):
        reel.tune(tmp_path / "no-search.pbtxt", tmp_path / "w")
    with pytest.raises(ValueError):
        reel.tune("base { trainer { steps: 1 } }\nno_such: 1", tmp_path / "w")
    with pytest.raises(TypeError, match="parallel"):
        reel.tune(search_text(tmp_path), tmp_path / "w", parallel="2")
    assert not (tmp_path / "w").exists()


def test_optuna_prunes_trials_from_training_callbacks(tmp_path):
    pruned_at = []

    def objective(trial):
        lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        cfg = moe_config(TRAIN, TEST, tmp_path / f"t{trial.number}", steps=16, checkpoints=False)
        cfg["trainer"]["eval_every_steps"] = 4

        def report(event):
            if event["kind"] != "eval":
                return False
            trial.report(event["eval"]["gap"], event["step"])
            if trial.should_prune():
                pruned_at.append(event["step"])
                return True  # stops the run after this step
            return False

        result = reel.train(cfg, overrides={"trainer.learning_rate.base": lr},
                            callbacks=[report])
        if result.stopped:
            raise optuna.TrialPruned()
        return result.final_eval["gap"]

    # A threshold no GAP reaches prunes every trial at its first report (step 4): each run must
    # stop there, and Optuna record it as pruned.
    study = optuna.create_study(direction="maximize",
                                pruner=optuna.pruners.ThresholdPruner(lower=1.1))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study.optimize(objective, n_trials=3)
    states = [t.state for t in study.trials]
    assert states.count(optuna.trial.TrialState.PRUNED) == 3
    assert pruned_at == [4, 4, 4]
