"""The training engine: one loop for every chapter, and what a run leaves behind.

``train`` (:func:`train.train`, ``TrainConfig``, ``History``) runs :func:`loop.training_loop` for one model;
``ensemble`` runs it for S seeds stacked into one vmapped model; ``batches`` feeds them; ``runs`` keeps checkpoints
and resumption; ``results`` is the :class:`results.Results` record every experiment returns; ``committed`` writes
and reads the runs committed under ``results/`` with their provenance; ``verdicts`` compares seeds.

Submodules are imported on first use (``energylab.engine.committed`` reads a committed file without torch).
"""
from energylab._lazy import lazy_submodules

__all__, __getattr__, __dir__ = lazy_submodules(__name__, __path__)
