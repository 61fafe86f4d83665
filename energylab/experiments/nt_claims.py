"""Chapter 5's readings of its committed NT runs, defined once: the chapter prints them, tests assert them.

Every function takes a :class:`~energylab.results.Results` of :mod:`energylab.experiments.nt` (as read by
``energylab.committed.load_committed``) and reads its histories (held-out accuracy of every seed, ``eval/acc``) and
its final table (``acc_mean``, ``acc_min``, ``acc_max``, ``solved`` of every task and mechanism).
"""
from __future__ import annotations

import torch

from energylab import verdicts
from energylab.results import Results

MECHANISMS = ("DPA", "EA")
SOLVED = 0.999  # a seed counts as solving its task at this final accuracy (the table's ``solved`` column)


def finals(results: Results) -> dict[str, dict]:
    """The final table as ``{"task/mechanism": row}``."""
    return {f"{row['task']}/{row['attention']}": row for row in results.tables["final"]}


def seed_curves(results: Results, task: str, mechanism: str, name: str = "eval/acc") -> tuple[list[int], torch.Tensor]:
    """Epochs and the (seeds, evaluations) float64 tensor of curve ``name`` of one task and mechanism."""
    return verdicts.seed_curves(results, f"{task}/{mechanism}/", name)


def seed_mean(results: Results, task: str, mechanism: str, name: str = "eval/acc") -> dict[int, float]:
    """``{epoch: seed-mean of curve name}``."""
    steps, curves = seed_curves(results, task, mechanism, name)
    return dict(zip(steps, curves.mean(0).tolist()))


def first_epoch(results: Results, task: str, mechanism: str, level: float, name: str = "eval/acc") -> int | None:
    """The first evaluated epoch at which the seed mean reaches ``level`` (None: never)."""
    steps, curves = seed_curves(results, task, mechanism, name)
    return verdicts.first_reaching(steps, curves.mean(0), level)


def gain(results: Results, task: str, mechanism: str, start: int, end: int) -> float:
    """Seed-mean held-out accuracy gained from epoch ``start`` to ``end``."""
    mean = seed_mean(results, task, mechanism)
    return mean[end] - mean[start]


def compare(results: Results, task: str, epoch: int | None = None) -> str:
    """EA against DPA, seed by seed (:func:`energylab.verdicts.compare`: "ahead", "behind" or "not separated"), on
    the final accuracies or on the held-out accuracy at ``epoch``."""
    values = {}
    for m in MECHANISMS:
        if epoch is None:
            values[m] = [float(v) for v in _final_accuracies(results, task, m)]
        else:
            steps, curves = seed_curves(results, task, m)
            values[m] = curves[:, steps.index(epoch)].tolist()
    return verdicts.compare(values["EA"], values["DPA"])


def _final_accuracies(results: Results, task: str, mechanism: str) -> list[float]:
    _, curves = seed_curves(results, task, mechanism)
    return curves[:, -1].tolist()  # the last held-out evaluation of every seed


__all__ = ["MECHANISMS", "SOLVED", "finals", "seed_curves", "seed_mean", "first_epoch", "gain", "compare"]
