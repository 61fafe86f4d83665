"""Verdicts from per-seed numbers: what a multi-seed run may say about two models, or about one model at two
depths, without a threshold picked after seeing the data. The chapters and their tests call the same functions."""
from __future__ import annotations

__all__ = ["compare", "scaling", "trend", "seed_curves", "first_reaching"]


def compare(a: list[float], b: list[float]) -> str:
    """"ahead" if every value of ``a`` is above every value of ``b``, "behind" if every one is below, else "not
    separated": with 3 seeds each, a separation happens by chance with probability 2/20 when the two are alike."""
    if min(a) > max(b):
        return "ahead"
    if max(a) < min(b):
        return "behind"
    return "not separated"


def scaling(before: list[float], after: list[float]) -> str:
    """Paired over seeds: "rises" if every seed's accuracy is higher at the later T, "falls" if lower, else "mixed"."""
    diffs = [y - x for x, y in zip(before, after)]
    if all(d > 0 for d in diffs):
        return "rises"
    if all(d < 0 for d in diffs):
        return "falls"
    return "mixed"


def trend(values: list[float]) -> str:
    """"falls" / "rises" if every step of ``values`` goes down / up, else "mixed"."""
    steps = [b - a for a, b in zip(values, values[1:])]
    if all(s < 0 for s in steps):
        return "falls"
    if all(s > 0 for s in steps):
        return "rises"
    return "mixed"


def seed_curves(results, prefix: str, name: str):
    """Steps and the (seeds, evaluations) float64 tensor of curve ``name`` of every history of ``results`` whose
    label starts with ``prefix`` + "seed" (the experiments label them ``<run>/seed<s>``)."""
    import torch

    histories = [h for label, h in results.histories.items() if label.startswith(prefix + "seed")]
    if not histories:
        raise KeyError(f"no histories labelled {prefix}seed... (labels: {sorted(results.histories)[:4]} ...)")
    steps = histories[0].steps[name]
    if any(h.steps[name] != steps for h in histories):
        raise ValueError(f"curve {name!r} was evaluated at different steps across the seeds of {prefix!r}")
    return steps, torch.tensor([h.curves[name] for h in histories], dtype=torch.float64)


def first_reaching(steps: list[int], values, level: float) -> int | None:
    """The first step at which ``values`` (one per step, e.g. a seed mean) reaches ``level``; None if never."""
    return next((step for step, v in zip(steps, values) if float(v) >= level), None)
