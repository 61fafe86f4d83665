"""The training engine: one loop for every chapter, and what a run leaves behind.

``train`` (:func:`train.train`, ``TrainConfig``, ``History``) runs :func:`loop.training_loop` for one model;
``ensemble`` runs it for S seeds stacked into one vmapped model; ``batches`` feeds them; ``runs`` keeps checkpoints
and resumption; ``results`` is the :class:`results.Results` record every experiment returns; ``committed`` writes
and reads the runs committed under ``results/`` with their provenance; ``verdicts`` compares seeds.

Submodules are imported on first use (``energylab.engine.committed`` reads a committed file without torch).
"""
import importlib

_SUBMODULES = ("train", "loop", "ensemble", "batches", "runs", "results", "committed", "verdicts")


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"energylab.engine.{name}")
    raise AttributeError(f"module 'energylab.engine' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)


__all__ = list(_SUBMODULES)
