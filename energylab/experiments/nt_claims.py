"""Chapter 5's readings of its committed NT runs, defined once: the chapter prints them, tests assert them.

Every function takes a :class:`~energylab.results.Results` of :mod:`energylab.experiments.nt` (as read by
``energylab.committed.load_committed``) and reads its histories (held-out accuracy of every seed, ``eval/acc``) and
its final table (``acc_mean``, ``acc_min``, ``acc_max``, ``solved`` of every task and mechanism).
"""
from __future__ import annotations

import torch

from energylab.results import Results

MECHANISMS = ("DPA", "EA")
SOLVED = 0.999  # a seed counts as solving its task at this final accuracy (the table's ``solved`` column)


def finals(results: Results) -> dict[str, dict]:
    """The final table as ``{"task/mechanism": row}``."""
    return {f"{row['task']}/{row['attention']}": row for row in results.tables["final"]}


def seed_curves(results: Results, task: str, mechanism: str, name: str = "eval/acc") -> tuple[list[int], torch.Tensor]:
    """Epochs and the (seeds, evaluations) float64 tensor of curve ``name`` of one task and mechanism."""
    histories = [h for label, h in results.histories.items() if label.startswith(f"{task}/{mechanism}/seed")]
    if not histories:
        raise KeyError(f"no histories of {task}/{mechanism} in this run (tasks: {sorted(finals(results))})")
    return histories[0].steps[name], torch.tensor([h.curves[name] for h in histories], dtype=torch.float64)


def seed_mean(results: Results, task: str, mechanism: str, name: str = "eval/acc") -> dict[int, float]:
    """``{epoch: seed-mean of curve name}``."""
    steps, curves = seed_curves(results, task, mechanism, name)
    return dict(zip(steps, curves.mean(0).tolist()))


def first_epoch(results: Results, task: str, mechanism: str, level: float, name: str = "eval/acc") -> int | None:
    """The first evaluated epoch at which the seed mean reaches ``level`` (None: never)."""
    return next((epoch for epoch, m in seed_mean(results, task, mechanism, name).items() if m >= level), None)


def gain(results: Results, task: str, mechanism: str, start: int, end: int) -> float:
    """Seed-mean held-out accuracy gained from epoch ``start`` to ``end``."""
    mean = seed_mean(results, task, mechanism)
    return mean[end] - mean[start]


def ahead(results: Results, task: str, first: str, second: str, epoch: int | None = None) -> bool:
    """Whether every seed of ``first`` beats every seed of ``second`` (final accuracy, or the held-out accuracy at
    ``epoch``): the book's test for "ahead", which a different draw of 8 seeds could not easily overturn."""
    if epoch is None:
        rows = finals(results)
        return rows[f"{task}/{first}"]["acc_min"] > rows[f"{task}/{second}"]["acc_max"]
    values = {}
    for m in (first, second):
        steps, curves = seed_curves(results, task, m)
        values[m] = curves[:, steps.index(epoch)]
    return bool(values[first].min() > values[second].max())


__all__ = ["MECHANISMS", "SOLVED", "finals", "seed_curves", "seed_mean", "first_epoch", "gain", "ahead"]
