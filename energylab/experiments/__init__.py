"""Trained experiments, one module per experiment, all following one pattern.

Each module ``energylab.experiments.<name>`` provides

- ``Config``: a dataclass with a comment per default; it has a ``device`` field, and ``seed`` (one model) or
  ``seeds`` (one model per seed);
- ``PROFILES``: ``{"quick": Config(...), "full": Config(...)}`` — quick runs in a notebook cell on a laptop CPU,
  full is the paper's scale (its own setup, as each profile's comment cites it) for a GPU; medium and others may
  follow. These dicts are the one declaration of the profiles: :func:`common_profiles` (what every chapter can
  run at) derives from them;
- ``CHAPTER``: the stem of the chapter notebook that trains it, ``notebooks/<CHAPTER>.ipynb`` (its "Run this
  chapter" box lists it; ``python -m energylab list`` shows it);
- ``COST``: ``{"quick": "...", "full": "..."}`` — a human estimate of each profile's cost, shown by
  ``python -m energylab list``;
- ``run(config, out_dir=None, resume=False) -> energylab.engine.results.Results``: with ``out_dir`` each model it
  trains checkpoints in a subfolder of its own (hopfield, which trains nothing: each finished row of its grid), and
  ``resume`` continues the unfinished ones and reuses the finished ones, with the numbers of one uninterrupted run
  (tests/experiments/test_experiments_resume.py, tests/experiments/test_sudoku_looped.py).

``python -m energylab run <name> --profile full --device cuda --out DIR`` trains and writes ``DIR/results.json``;
a notebook reads it back with :func:`load_or_run` instead of training. A run folder holds one run: its config is
recorded in ``DIR/run.json`` when it starts and in ``results.json`` when it ends, and neither a fresh run, nor a
resume, nor :func:`load_or_run` ever mixes it with another config (see :func:`run_experiment`).
"""
from __future__ import annotations

import dataclasses
import importlib
import os
import types
import typing
from types import ModuleType

from energylab.engine import runs
from energylab.engine.results import Results
from energylab.engine.runs import RESULTS, config_record, process_rank
from energylab.engine.train import check_device

# experiment name -> module that implements it (imported on first use); each experiment's owner adds one line.
# A chapter's "Run this chapter" box lists its experiments in this order (scripts/chapter_cells.py)
EXPERIMENTS = {
    "alternating": "energylab.experiments.alternating",  # paper 000: Algorithm 1 (alternating optimisation), chapter 2
    "nt": "energylab.experiments.nt",  # paper 001: DPA vs expressive attention on the NT delayed-addition tasks
    # paper 000: MHA vs MHA2nd1st (with/without FFN) on the longest increasing subsequence
    "lis": "energylab.experiments.lis",
    "attractor": "energylab.experiments.attractor",  # paper 002: bare self-attention trained as an attractor net
    "hopfield": "energylab.experiments.hopfield",  # Ramsauer et al.: retrieval of stored digits against P and beta
    "hyperset": "energylab.experiments.hyperset",  # paper 004: Hyper-SET vs Transformer on images, and ablations
    "sudoku": "energylab.experiments.sudoku",  # papers 003/004: one looped layer on Sudoku, tested at other T
    "recurrent": "energylab.experiments.recurrent",  # paper 003: ItrSA vs AKOrN, Lyapunov exponents, pseudo-energy
    "forms": "energylab.experiments.forms",  # every trainable form (and derived ones) on 4x4 Sudoku, one budget
    "denoising": "energylab.experiments.denoising",  # Smart et al.: in-context denoising, one Hopfield layer per map
}

# experiment -> its config fields that name looped layers (energylab.layers.registry.LAYERS): checked by get_config,
# so that `python -m energylab run sudoku --set layer=NAME` refuses an unknown NAME before anything trains
LAYER_FIELDS = {"sudoku": ("layer", "layers"), "forms": ("layers",), "hyperset": ("layers",)}

# experiment -> config fields that count what a run needs at least one of (samples, queries, steps, widths; a tuple
# field: at least one entry, each >= 1) and tuple fields that need at least one entry. 0 or () once ran to the end and
# wrote NaN means (or a checker's "0 violations" over zero queries) to results.json: get_config refuses them.
AT_LEAST_ONE = {
    "alternating": ("n_train", "n_test", "n_tokens", "dim", "n_classes", "epochs"),
    "nt": ("seeds", "n_batch", "n_eval_series", "n_eval_predict", "n_final_series"),
    "lis": ("lengths", "dims", "n_train", "n_test", "epochs", "batch_size", "layers", "heads"),
    "attractor": ("image_size", "patch", "dim", "n_train", "n_eval", "epochs", "batch_size", "iterations",
                  "long_iterations", "n_long", "baseline_steps", "baseline_batch"),
    "hopfield": ("n_patterns", "n_queries", "patch", "steps"),
    "hyperset": ("n_train", "n_test", "dim", "heads", "iterations", "test_iterations", "epochs", "batch_size"),
    "sudoku": ("size", "n_train", "n_test", "dim", "heads", "iterations", "test_iterations", "epochs", "batch_size",
               "n_eval"),
    "recurrent": ("size", "n_train", "n_test", "dim", "heads", "iterations", "test_iterations", "epochs",
                  "batch_size", "lyap_steps", "n_sweep"),
    "forms": ("size", "n_train", "n_test", "dim", "heads", "iterations", "steps", "batch_size", "timing_steps"),
    "denoising": ("n", "d", "contexts", "n_train", "n_test", "epochs", "batch_size"),
}
NOT_EMPTY = {
    "alternating": ("rates_W",), "nt": ("runs", "attentions"), "lis": ("variants", "seeds"), "hopfield": ("betas",),
    "hyperset": ("layers", "seeds"), "sudoku": ("test_sets", "seeds"), "recurrent": ("layers", "test_sets"),
    "forms": ("layers", "seeds"), "denoising": ("kinds", "seeds"),
}


def get_experiment(name: str) -> ModuleType:
    """The module of experiment ``name``; ValueError listing the valid names if unknown."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; valid experiments: {', '.join(sorted(EXPERIMENTS))}")
    return importlib.import_module(EXPERIMENTS[name])


def get_config(name: str, profile: str = "quick", **overrides):
    """A copy of the ``profile`` config of experiment ``name`` with fields replaced by ``overrides``.

    ValueError listing the valid profiles (or the valid fields) for a wrong name, or naming the field whose
    override does not fit its annotated type (ints are accepted for floats, lists for tuples).
    """
    module = get_experiment(name)
    if profile not in module.PROFILES:
        raise ValueError(f"unknown profile {profile!r} for experiment {name!r}; "
                         f"valid profiles: {', '.join(module.PROFILES)}")
    config = module.PROFILES[profile]
    fields = {f.name for f in dataclasses.fields(config)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        hint = ("; it trains one model per entry of 'seeds', e.g. --set seeds=[3] (seeds=(3,))"
                if "seed" in unknown and "seeds" in fields else "")
        raise ValueError(f"unknown config field(s) {unknown} for experiment {name!r}{hint}; valid: {sorted(fields)}")
    hints = typing.get_type_hints(type(config))
    checked = {}
    for key, value in overrides.items():
        checked[key] = _coerce(value, hints.get(key, typing.Any))
        if checked[key] is _NO:
            raise ValueError(f"config field {key!r} of experiment {name!r} expects {_type_name(hints[key])}, "
                             f"got {value!r} ({type(value).__name__})")
    config = dataclasses.replace(config, **checked)
    _check_counts(name, config)
    _check_layers(name, config)
    return config


def _check_counts(name: str, config) -> None:
    """ValueError naming the field if one of :data:`AT_LEAST_ONE` is below 1 or one of :data:`NOT_EMPTY` is empty."""
    for field in AT_LEAST_ONE.get(name, ()):
        value = getattr(config, field)
        if isinstance(value, tuple):
            if not value or any(isinstance(v, int) and v < 1 for v in value):
                raise ValueError(f"config field {field!r} of experiment {name!r} must hold at least one entry, each "
                                 f">= 1 (it counts what the run trains or measures), got {value!r}")
        elif isinstance(value, int) and value < 1:  # None (where allowed: attractor's n_train, all) passes
            raise ValueError(f"config field {field!r} of experiment {name!r} must be >= 1 (with {value} the run "
                             f"has nothing to train or measure), got {value!r}")
    for field in NOT_EMPTY.get(name, ()):
        if not getattr(config, field):
            raise ValueError(f"config field {field!r} of experiment {name!r} must hold at least one entry, "
                             f"got {getattr(config, field)!r}")


def _check_layers(name: str, config) -> None:
    """ValueError (listing every registered layer) if a field of :data:`LAYER_FIELDS` names an unknown layer."""
    from energylab.layers.registry import layer_builder

    for field in LAYER_FIELDS.get(name, ()):
        value = getattr(config, field, None) or ()  # a field this experiment does not have, or () / None
        for layer in (value,) if isinstance(value, str) else value:
            try:
                layer_builder(layer)
            except ValueError as err:
                raise ValueError(f"config field {field!r} of experiment {name!r}: {err}") from None


_NO = object()  # "does not fit the annotation"


def _coerce(value, hint):
    """``value`` as the annotated type ``hint`` (int -> float, list -> tuple), or ``_NO`` if it does not fit."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return value
    if origin in (typing.Union, types.UnionType):
        fits = [out for out in (_coerce(value, arg) for arg in args) if out is not _NO]
        return fits[0] if fits else _NO
    if hint is type(None) or hint is None:
        return value if value is None else _NO
    if hint in (int, float) and isinstance(value, bool):
        return _NO
    if hint is float and isinstance(value, int):
        return float(value)
    if origin is tuple:
        if not isinstance(value, (tuple, list)):
            return _NO
        items = args[:1] * len(value) if len(args) == 2 and args[1] is Ellipsis else args
        out = tuple(_coerce(v, h) for v, h in zip(value, items))
        return out if len(items) == len(value) and all(o is not _NO for o in out) else _NO
    if isinstance(hint, type):
        return value if isinstance(value, hint) else _NO
    return value  # an annotation this check does not understand: accept


def _type_name(hint) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def common_profiles() -> tuple[str, ...]:
    """The profiles every registered experiment defines, in the first experiment's order: the scales a chapter can
    be executed at (``setup_notebook``'s default, ``scripts/build_book.py --profile``)."""
    modules = [get_experiment(name) for name in EXPERIMENTS]
    return tuple(p for p in modules[0].PROFILES if all(p in m.PROFILES for m in modules))


def chapter_number(chapter: str) -> int:
    """``"08_hyperset"`` -> 8: the number in a chapter notebook's name."""
    return int(chapter.split("_", 1)[0])


def describe() -> list[dict]:
    """One row per experiment and profile: name, chapter, profile, estimated cost, one-line description."""
    rows = []
    for name in sorted(EXPERIMENTS):
        module = get_experiment(name)
        summary = (module.__doc__ or "").strip().splitlines()[0] if module.__doc__ else ""
        for profile in module.PROFILES:
            rows.append({"experiment": name, "chapter": module.CHAPTER, "profile": profile,
                         "cost": module.COST.get(profile, "?"), "about": summary})
    return rows


def run_experiment(name: str, profile: str = "quick", out_dir: str | None = None, resume: bool = False,
                   **overrides) -> Results:
    """Run experiment ``name`` at ``profile`` (fields replaced by ``overrides``); save Results in ``out_dir``.

    With ``out_dir`` the folder holds exactly this run: ``run.json`` (experiment, profile, config) is written
    when it starts, checkpoints while it trains, ``results.json`` when it has finished. A fresh run refuses a
    folder that already holds a run (ValueError: pass ``resume=True`` to continue it, or choose another
    folder). ``resume=True`` continues the run in ``out_dir`` if it was started with the same experiment and
    config (``device`` and ``progress`` may differ), else raises a ValueError naming the differing fields; a
    folder holding no run is started fresh. When training fails (diverges, Ctrl-C) no results.json is written;
    the checkpoints written so far are kept, and if there are none, the files and folders this call created
    are removed (:func:`energylab.engine.runs.experiment_folder` owns the folder). ``Results.config`` is the full
    config as JSON (:func:`~energylab.engine.runs.config_record`).
    """
    module = get_experiment(name)
    config = get_config(name, profile, **overrides)
    check_device(config.device)
    record = config_record(config)
    if out_dir is None:
        results = module.run(config)
        results.config = record
        return results
    with runs.experiment_folder(out_dir, name, profile, record, resume):
        results = module.run(config, out_dir=out_dir, resume=resume)
    results.config = record
    if process_rank() == 0:
        results.save(out_dir)
    return results


def load_or_run(name: str, profile: str = "quick", out_dir: str | None = None, **overrides) -> Results:
    """Results from ``out_dir/results.json`` when it holds this experiment at this config, else a run saved there.

    This is how a chapter shows full-profile results trained elsewhere (``python -m energylab run``) on a
    laptop: pass the folder the command wrote to, the profile and the overrides it was run with. Results
    recorded under another experiment or config (``device`` and ``progress`` aside) are never returned: that is
    a ValueError naming the differing fields. Without results.json the run in ``out_dir`` is continued (an
    interrupted run of the same config) or started, as :func:`run_experiment` with ``resume=True`` does.
    """
    path = None if out_dir is None else os.path.join(out_dir, RESULTS)
    if path is not None and os.path.exists(path):
        record = config_record(get_config(name, profile, **overrides))
        results = Results.load(out_dir)
        runs.check_recorded(path, results.experiment, results.config, name, record)
        return results
    return run_experiment(name, profile, out_dir=out_dir, resume=out_dir is not None, **overrides)
