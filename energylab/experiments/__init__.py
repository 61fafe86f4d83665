"""Trained experiments, one module per experiment, all following one pattern.

Each module ``energylab.experiments.<name>`` provides

- ``Config``: a dataclass with a comment per default (it has at least ``device`` and ``seed`` fields);
- ``PROFILES``: ``{"quick": Config(...), "full": Config(...)}`` — quick runs in a notebook cell on a laptop CPU,
  full is the paper's scale (../shared/papers/NOTES.md) for a GPU;
- ``COST``: ``{"quick": "...", "full": "..."}`` — a human estimate of each profile's cost, shown by
  ``python -m energylab list``;
- ``run(config, out_dir=None, resume=False) -> energylab.train.Results``.

``python -m energylab run <name> --profile full --device cuda --out DIR`` trains and writes ``DIR/results.json``;
a notebook reads it back with :func:`load_or_run` instead of training.
"""
from __future__ import annotations

import dataclasses
import importlib
import os
from types import ModuleType

from energylab.train import RESULTS, Results

# experiment name -> module that implements it (imported on first use); each experiment's owner adds one line
EXPERIMENTS = {
    "nt": "energylab.experiments.nt",  # paper 001: DPA vs expressive attention on the NT delayed-addition tasks
}


def get_experiment(name: str) -> ModuleType:
    """The module of experiment ``name``; ValueError listing the valid names if unknown."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; valid experiments: {', '.join(sorted(EXPERIMENTS))}")
    return importlib.import_module(EXPERIMENTS[name])


def get_config(name: str, profile: str = "quick", **overrides):
    """A copy of the ``profile`` config of experiment ``name`` with fields replaced by ``overrides``.

    ValueError listing the valid profiles (or the valid fields) for a wrong name.
    """
    module = get_experiment(name)
    if profile not in module.PROFILES:
        raise ValueError(f"unknown profile {profile!r} for experiment {name!r}; "
                         f"valid profiles: {', '.join(module.PROFILES)}")
    config = module.PROFILES[profile]
    fields = {f.name for f in dataclasses.fields(config)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"unknown config field(s) {unknown} for experiment {name!r}; valid: {sorted(fields)}")
    return dataclasses.replace(config, **overrides)


def describe() -> list[dict]:
    """One row per experiment and profile: name, profile, estimated cost, one-line description."""
    rows = []
    for name in sorted(EXPERIMENTS):
        module = get_experiment(name)
        summary = (module.__doc__ or "").strip().splitlines()[0] if module.__doc__ else ""
        for profile in module.PROFILES:
            rows.append({"experiment": name, "profile": profile, "cost": module.COST.get(profile, "?"),
                         "about": summary})
    return rows


def run_experiment(name: str, profile: str = "quick", out_dir: str | None = None, resume: bool = False,
                   **overrides) -> Results:
    """Run experiment ``name`` at ``profile`` (fields replaced by ``overrides``); save Results in ``out_dir``."""
    module = get_experiment(name)
    config = get_config(name, profile, **overrides)
    results = module.run(config, out_dir=out_dir, resume=resume)
    if out_dir is not None and _rank() == 0:
        results.save(out_dir)
    return results


def load_or_run(name: str, profile: str = "quick", out_dir: str | None = None, **overrides) -> Results:
    """Results from ``out_dir/results.json`` when it holds this experiment, else a fresh run (saved there).

    This is how a chapter shows full-profile results trained elsewhere (``python -m energylab run``) on a
    laptop: pass the folder the command wrote to.
    """
    path = None if out_dir is None else os.path.join(out_dir, RESULTS)
    if path is not None and os.path.exists(path):
        results = Results.load(out_dir)
        if results.experiment != name:
            raise ValueError(f"{path} holds experiment {results.experiment!r}, not {name!r}")
        return results
    return run_experiment(name, profile, out_dir=out_dir, **overrides)


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
