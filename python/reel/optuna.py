"""Optuna drives :func:`reel.train` (docs/python.md, "Search with Optuna").

``reel.optuna.objective(config, space)`` is an Optuna objective: each trial suggests the values of
``space`` (``--set`` field paths → what to draw), trains ``config`` with them as overrides and
returns a held-out metric of the final evaluation; :class:`PruningCallback` reports every
evaluation to the trial and stops a run the study's pruner prunes. Needs Debian's
``python3-optuna``; ``import reel`` does not import it.
"""

import os

import optuna

import reel

METRICS = ("gap", "hit_at_1", "perr", "map")


def _metric(metric):
    if not isinstance(metric, str):
        raise TypeError(f"metric must be a str, not {type(metric).__name__}")
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
    return metric


class PruningCallback:
    """A :func:`reel.train` callback: at each evaluation reports ``event["eval"][metric]`` at the
    event's step to ``trial.report``, and raises :class:`optuna.TrialPruned` when
    ``trial.should_prune()``; the run stops after that step and ``reel.train`` raises it on (so
    ``study.optimize`` records the trial as pruned)."""

    def __init__(self, trial, metric="gap"):
        self.trial = trial
        self.metric = _metric(metric)

    def __call__(self, event):
        if event.get("kind") != "eval":
            return False
        step = event["step"]
        self.trial.report(float(event["eval"][self.metric]), step)
        if self.trial.should_prune():
            raise optuna.TrialPruned(f"pruned at step {step}")
        return False


def suggest(trial, space):
    """The overrides of one trial: for each ``field → spec`` of ``space`` (a dict), the value the
    trial suggests. A spec is a list of values (categorical), a ``(low, high)`` tuple (ints:
    ``suggest_int``, else ``suggest_float``), a dict ``{"low", "high", "log", "step"}`` or an
    Optuna distribution (``FloatDistribution``, ``IntDistribution``,
    ``CategoricalDistribution``). The field is the parameter's name in the study."""
    if not isinstance(space, dict) or not space:
        raise TypeError("space must be a non-empty dict of field path -> values or range")
    d = optuna.distributions
    out = {}
    for field, spec in space.items():
        if not isinstance(field, str):
            raise TypeError(f"space keys must be field paths (str), not {type(field).__name__}")
        if isinstance(spec, tuple) and len(spec) == 2:
            spec = {"low": spec[0], "high": spec[1]}
        if isinstance(spec, dict):
            unknown = set(spec) - {"low", "high", "log", "step"}
            if unknown or not {"low", "high"} <= set(spec):
                raise ValueError(f"space[{field!r}]: a range is {{'low', 'high'[, 'log', 'step']}}"
                                 f", got {sorted(spec)}")
            ints = all(isinstance(spec[k], int) and not isinstance(spec[k], bool)
                       for k in ("low", "high"))
            spec = (d.IntDistribution if ints else d.FloatDistribution)(
                spec["low"], spec["high"], log=bool(spec.get("log", False)),
                step=spec.get("step", 1 if ints else None))
        elif isinstance(spec, list):
            if not spec:
                raise ValueError(f"space[{field!r}]: an empty list of values")
            spec = d.CategoricalDistribution(spec)
        if isinstance(spec, d.IntDistribution):
            out[field] = trial.suggest_int(field, spec.low, spec.high, step=spec.step, log=spec.log)
        elif isinstance(spec, d.FloatDistribution):
            out[field] = trial.suggest_float(field, spec.low, spec.high, step=spec.step,
                                             log=spec.log)
        elif isinstance(spec, d.CategoricalDistribution):
            out[field] = trial.suggest_categorical(field, list(spec.choices))
        else:
            raise TypeError(f"space[{field!r}] must be a list, a (low, high) tuple, a range dict "
                            f"or an Optuna distribution, not {type(spec).__name__}")
    return out


def objective(config, space, overrides=None, *, metric="gap", prune=True, workdir=None,
              verbose=False):
    """An Optuna objective (``study.optimize(reel.optuna.objective(...), n_trials=...)``; the
    study's direction must be ``"maximize"``: every metric is better higher).

    Each trial trains ``config`` (as :func:`reel.train` takes it) with ``overrides`` and the
    values :func:`suggest` draws from ``space``, and returns ``final_eval[metric]`` (``gap``,
    ``hit_at_1``, ``perr`` or ``map``; the config needs ``eval_data``). ``prune``: a
    :class:`PruningCallback` reports each evaluation (``trainer.eval_every_steps``). ``workdir``:
    each trial's checkpoints and metrics log in ``workdir/trial-<number>/`` (its checkpoint URI
    in the trial's user attribute ``checkpoint``); None: trials write no checkpoint and no log.
    """
    metric = _metric(metric)
    if workdir is not None:
        workdir = os.fspath(workdir)
    base = dict(overrides or {})
    if not isinstance(prune, bool):
        raise TypeError(f"prune must be a bool, not {type(prune).__name__}")

    def run(trial):
        sets = dict(base)
        if workdir is None:
            sets.update({"trainer.checkpoint_dir": "", "trainer.metrics_log": "",
                         "trainer.tensorboard_dir": ""})
        else:
            folder = os.path.join(workdir, f"trial-{trial.number}")
            sets.update({"trainer.checkpoint_dir": os.path.join(folder, "checkpoints"),
                         "trainer.metrics_log": os.path.join(folder, "metrics.jsonl"),
                         "trainer.tensorboard_dir": ""})
        sets.update(suggest(trial, space))
        callbacks = [PruningCallback(trial, metric)] if prune else []
        result = reel.train(config, overrides=sets, callbacks=callbacks, verbose=verbose)
        if not result.final_eval:
            raise ValueError("the run made no final evaluation: the config needs eval_data")
        trial.set_user_attr("steps", result.steps)
        if result.checkpoint:
            trial.set_user_attr("checkpoint", result.checkpoint)
        return float(result.final_eval[metric])

    return run
