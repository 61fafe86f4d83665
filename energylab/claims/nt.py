"""Chapter 5's readings of its committed NT runs, defined once: the chapter prints them, tests assert them.

Every function takes a :class:`~energylab.engine.results.Results` of :mod:`energylab.experiments.nt` (as read by
``energylab.engine.committed.load_committed``) and reads its histories (held-out accuracy of every seed, ``eval/acc``)
and its final table (``acc_mean``, ``acc_min``, ``acc_max``, ``solved`` of every task and mechanism).
"""
from __future__ import annotations

import torch

from energylab.engine import verdicts
from energylab.engine.results import Results

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
    """EA against DPA, seed by seed (:func:`energylab.engine.verdicts.compare`: "ahead", "behind" or "not separated"),
    on the final accuracies or on the held-out accuracy at ``epoch``."""
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


def long_claims(long: Results) -> dict[str, bool]:
    """Section 5.8: N16T2 at 5x (N_con 16) and 3x (N_con 32) the paper's epochs, in the chapter's convention (the
    loss averaged over d, clipped at 1): ``results/nt/long-n16t2.json``."""
    rows = finals(long)
    return {
        "N16T2-16, 10,000 epochs: no seed of either mechanism solves it":
            rows["N16T2-16/DPA"]["solved"] == rows["N16T2-16/EA"]["solved"] == 0,
        "N16T2-16: both seed means still gain at least 0.02 over the last 2,000 epochs (no plateau, slow)":
            all(gain(long, "N16T2-16", m, 8000, 10000) >= 0.02 for m in MECHANISMS),
        "N16T2-16: EA and DPA not separated at the end (seed ranges overlap)":
            compare(long, "N16T2-16") == "not separated",
        "N16T2-32, 6,000 epochs: neither solves it, and every DPA seed ends above every EA seed":
            rows["N16T2-32/DPA"]["solved"] == rows["N16T2-32/EA"]["solved"] == 0
            and compare(long, "N16T2-32") == "behind",
    }


def causes_claims(causes: Results) -> dict[str, bool]:
    """Section 5.8: N16T2 at the paper's 2000 epochs with the loss summed over d (16 times the averaged loss's
    gradient), with and without the clip: ``results/nt/n16t2-causes.json``."""
    rows = finals(causes)
    free = "N16T2-16+sum+noclip"
    first = first_epoch(causes, free, "EA", 0.99)
    return {
        "summed and unclipped: every EA seed solves N16T2-16 within the paper's 2000 epochs":
            rows[f"{free}/EA"]["solved"] == 8 and first is not None and first <= 2000,
        "summed and unclipped: no DPA seed solves it, and every EA seed ends above every DPA seed":
            rows[f"{free}/DPA"]["solved"] == 0 and compare(causes, free) == "ahead",
        "summed but clipped at 1: no seed of either passes 0.75 (the clip discards the larger gradient)":
            max(rows[f"N16T2-16+sum/{m}"]["acc_max"] for m in MECHANISMS) < 0.75,
        "LayerNorm gain and shift do not rescue the clipped run: no seed passes 0.8":
            max(rows[f"N16T2-16+sum+affine/{m}"]["acc_max"] for m in MECHANISMS) < 0.8,
        "N16T2-32, summed and clipped: no plateau near 0.55, both seed means pass 0.7 in 2000 epochs":
            min(rows[f"N16T2-32+sum/{m}"]["acc_mean"] for m in MECHANISMS) > 0.7,
    }


def figures_claims(figures: Results) -> dict[str, bool]:
    """Section 5.9: the paper's other N16 experiments with the loss summed over d: ``results/nt/figures.json``."""
    rows = finals(figures)
    mix = "N16T2+T2S-32"
    halves = [figures.final[f"{mix}/{m}/acc_{v}_mean"] for m in MECHANISMS for v in ("NT", "NT-S")]
    return {
        "N16T2-32: no plateau near 0.55, both seed means pass 0.7 by epoch 500":
            all(seed_mean(figures, "N16T2-32", m)[500] > 0.7 for m in MECHANISMS),
        "N16T2-32: every EA seed solves it; DPA's mean ends above 0.99, but not every DPA seed solves it":
            rows["N16T2-32/EA"]["solved"] == 8 and rows["N16T2-32/DPA"]["acc_mean"] > 0.99
            and rows["N16T2-32/DPA"]["solved"] < 8,
        "N16T2-52: every EA seed ends above every DPA seed, and no DPA seed solves it":
            compare(figures, "N16T2-52") == "ahead" and rows["N16T2-52/DPA"]["solved"] == 0,
        "N16T5-64: neither mechanism passes 0.2 in 2,000 epochs":
            max(rows[f"N16T5-64/{m}"]["acc_max"] for m in MECHANISMS) < 0.2,
        "the N16T2 + N16T2-S mixture: both mechanisms learn both halves above 0.9 (the paper: DPA about 0.34 on NT)":
            min(halves) > 0.9,
        "NT-R at N_con 64: every DPA seed ends above every EA seed (the paper: EA 98.8%, DPA 0.36)":
            compare(figures, "N16T2R-64") == "behind" and rows["N16T2R-64/DPA"]["acc_mean"] > 0.95,
    }


def guard_effect(free: Results, free_task: str, clipped: Results, clipped_task: str) -> dict[str, dict]:
    """What a gradient clip does to the seed-mean held-out accuracy: for each mechanism, ``{"epochs": [...],
    "change": clipped minus unclipped seed mean at each evaluation (float64), "slowdown": its largest drop,
    "at": the epoch of that drop, "final": the change at the last evaluation}``. The two runs must share seeds, data
    and evaluation epochs (the clip-guard profile and its twin in n16t2-causes)."""
    out = {}
    for m in MECHANISMS:
        steps, free_curves = seed_curves(free, free_task, m)
        clipped_steps, clipped_curves = seed_curves(clipped, clipped_task, m)
        if steps != clipped_steps or free_curves.shape != clipped_curves.shape:
            raise ValueError(f"{free_task} and {clipped_task} are not twins: their seeds or epochs differ")
        change = clipped_curves.mean(0) - free_curves.mean(0)
        worst = int(change.argmin())
        out[m] = {"epochs": steps, "change": change, "slowdown": float(-change[worst]), "at": steps[worst],
                  "final": float(change[-1])}
    return out


def guard_claims(causes: Results, guard: Results) -> dict[str, bool]:
    """Section 5.9: what the figures run's clip at 10 does, on its measurable twin (N16T2-16, the loss summed over d,
    2000 epochs): ``results/nt/clip-guard.json`` against n16t2-causes' unclipped run."""
    free, clipped = "N16T2-16+sum+noclip", "N16T2-16+sum+clip10"
    effect = guard_effect(causes, free, guard, clipped)
    return {
        "the guard is one-sided: it slows DPA's seed mean more than EA's (largest drops)":
            effect["DPA"]["slowdown"] > effect["EA"]["slowdown"],
        "at the end the guard moves neither seed mean by more than 0.005":
            all(abs(e["final"]) < 0.005 for e in effect.values()),
        "with and without the guard every EA seed solves it and ends above every DPA seed":
            finals(guard)[f"{clipped}/EA"]["solved"] == finals(causes)[f"{free}/EA"]["solved"] == 8
            and compare(guard, clipped) == compare(causes, free) == "ahead",
        "with and without the guard EA's seed mean reaches 0.99 at the same evaluation":
            first_epoch(guard, clipped, "EA", 0.99) == first_epoch(causes, free, "EA", 0.99),
    }


__all__ = ["MECHANISMS", "SOLVED", "finals", "seed_curves", "seed_mean", "first_epoch", "gain", "compare",
           "long_claims", "causes_claims", "figures_claims", "guard_effect",
           "guard_claims"]
