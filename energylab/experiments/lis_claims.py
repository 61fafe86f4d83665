"""Chapter 4's readings of its committed LIS runs, defined once: the chapter prints them, tests assert them.

A run of :mod:`energylab.experiments.lis` labels its histories ``L<L>/d<d>/<variant>/seed<s>`` and evaluates the
test set every ``eval_every`` steps: ``eval/exact`` (the paper's exact match: trace and answer right) and, with
``greedy_answer``, ``eval/answer_greedy`` (the answer written after the model's own trace).
"""
from __future__ import annotations

import torch

from energylab import verdicts
from energylab.experiments.lis import final_accuracy
from energylab.results import Results


def _cell(results: Results) -> tuple[int, int]:
    """(L, d) of a run of one grid cell (the committed medium and long runs)."""
    (length,), (dim,) = results.config["lengths"], results.config["dims"]
    return length, dim


def seed_curves(results: Results, variant: str, name: str = "eval/exact") -> tuple[list[int], torch.Tensor]:
    """Steps and the (seeds, evaluations) tensor of curve ``name`` of one variant."""
    length, dim = _cell(results)
    return verdicts.seed_curves(results, f"L{length}/d{dim}/{variant}/", name)


def first_step(results: Results, variant: str, level: float, name: str = "eval/exact") -> int | None:
    """The first evaluated step at which the seed mean of ``name`` reaches ``level`` (None: never)."""
    steps, curves = seed_curves(results, variant, name)
    return verdicts.first_reaching(steps, curves.mean(0), level)


def finals(results: Results, variant: str, name: str = "eval/exact") -> list[float]:
    """Each seed's final number: the mean of its last ``last_k`` evaluations (the paper's last-5-epochs number)."""
    length, dim = _cell(results)
    k = results.config["last_k"]
    return [final_accuracy(h, k, name) for label, h in results.histories.items()
            if label.startswith(f"L{length}/d{dim}/{variant}/seed")]


def compare(results: Results, first: str, second: str, name: str = "eval/exact", step: int | None = None) -> str:
    """``first`` against ``second`` seed by seed (:func:`energylab.verdicts.compare`), on the final numbers or on
    the evaluation at ``step``."""
    if step is None:
        return verdicts.compare(finals(results, first, name), finals(results, second, name))
    values = []
    for variant in (first, second):
        steps, curves = seed_curves(results, variant, name)
        values.append(curves[:, steps.index(step)].tolist())
    return verdicts.compare(*values)


__all__ = ["seed_curves", "first_step", "finals", "compare"]
