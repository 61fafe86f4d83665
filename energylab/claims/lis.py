"""Chapter 4's readings of its committed LIS runs, defined once: the chapter prints them, tests assert them.

A run of :mod:`energylab.experiments.lis` labels its histories ``L<L>/d<d>/<variant>/seed<s>`` and evaluates the
test set every ``eval_every`` steps: ``eval/exact`` (the paper's exact match: trace and answer right) and, with
``greedy_answer``, ``eval/answer_greedy`` (the answer written after the model's own trace).
"""
from __future__ import annotations

import torch

from energylab.engine import verdicts
from energylab.engine.results import Results
from energylab.experiments.lis import final_accuracy


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
    """``first`` against ``second`` seed by seed (:func:`energylab.engine.verdicts.compare`), on the final numbers or on
    the evaluation at ``step``."""
    if step is None:
        return verdicts.compare(finals(results, first, name), finals(results, second, name))
    values = []
    for variant in (first, second):
        steps, curves = seed_curves(results, variant, name)
        values.append(curves[:, steps.index(step)].tolist())
    return verdicts.compare(*values)


def long_claims(long: Results) -> dict[str, bool]:
    """Section 4.8: the medium cell (L = 6, d = 32, attention alone, 3 seeds) trained 9,600 steps on 51,200
    samples: ``results/lis/long.json``. MHA2nd1st-only against MHA-only, the paper's sharpest comparison."""
    mha, newton = "MHA-only", "MHA2nd1st-only"
    length, _ = _cell(long)
    base = long.extra["baselines"][str(length)]
    steps, _ = seed_curves(long, mha)
    params = {row["variant"]: row["attention_params_per_layer"] for row in long.tables["grid"]}
    return {
        "MHA-only passes 50% exact match (seed mean) within the run":
            first_step(long, mha, 0.5) is not None,
        "MHA2nd1st-only reaches 50% and 80% exact match at the same evaluation as MHA-only, not earlier":
            all(first_step(long, newton, level) == first_step(long, mha, level) for level in (0.5, 0.8)),
        "from step 1,600 on, no evaluation separates the two (exact match or answer): every seed range overlaps":
            all(compare(long, newton, mha, name, step) == "not separated"
                for name in ("eval/exact", "eval/answer_greedy") for step in steps if step >= 1600),
        "the final exact match and answer are not separated either":
            all(compare(long, newton, mha, name) == "not separated" for name in ("eval/exact", "eval/answer_greedy")),
        "both end at least 10 times the input-blind exact match and 3 times its answer accuracy":
            all(min(finals(long, v)) >= 10 * base["trace"] and min(finals(long, v, "eval/answer_greedy"))
                >= 3 * base["answer"] for v in (mha, newton)),
        "MHA2nd1st-only does it with about a quarter fewer attention parameters":
            0.7 < params[newton] / params[mha] < 0.8,
    }


def gpu_claims(gpu: Results) -> dict[str, bool]:
    """Section 4.8's GPU run: the paper's smallest sequence length at d = 64 (L = 10, attention alone, 4 seeds a
    variant, 4,800 steps of the book's recipe on one H100: ``results/lis/gpu-l10-d64-long.json``)."""
    mha, newton = "MHA-only", "MHA2nd1st-only"
    length, _ = _cell(gpu)
    base = gpu.extra["baselines"][str(length)]
    steps, _ = seed_curves(gpu, mha)
    return {
        "both learn: every seed ends above 3 times the input-blind exact match":
            all(min(finals(gpu, v)) > 3 * base["trace"] for v in (mha, newton)),
        "MHA2nd1st-only's seed mean reaches 50% exact match no earlier than MHA-only's":
            first_step(gpu, mha, 0.5) is not None and first_step(gpu, newton, 0.5) is not None
            and first_step(gpu, newton, 0.5) >= first_step(gpu, mha, 0.5),
        "no evaluation separates the two: at every one the seed ranges overlap":
            all(compare(gpu, newton, mha, "eval/exact", step) == "not separated" for step in steps),
        "neither reaches 80% within the run: both were still learning":
            first_step(gpu, mha, 0.8) is None and first_step(gpu, newton, 0.8) is None,
    }


__all__ = ["seed_curves", "first_step", "finals", "compare", "long_claims", "gpu_claims"]
