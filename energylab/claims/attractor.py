"""What chapter 7 states about a run of the bare attractor model, as named booleans and a table: the chapter and the
tests call these on the live quick run and on the committed files (:mod:`energylab.experiments.attractor`)."""
from __future__ import annotations

from energylab.engine.results import Results
from energylab.experiments.attractor_mechanism import MEAN_DIGIT_TOL

__all__ = ["margins", "claims", "decide_table", "MASKED_TOL"]

MASKED_TOL = 0.02  # share of the mean digit's MSE within which masked prediction counts as painting the mean digit


def margins(final: dict, patch: int, model: str = "bare") -> dict[str, float]:
    """Model's best MSE minus the mean-digit baseline's, per task (negative: the model beats painting the mean
    digit). ``final``: a run's ``Results.final``; ``patch``: the patching that model was scored with."""
    return {task: final[f"{model}/{task}/best_mse"] - final[f"baseline/{task}/p{patch}/mean_digit"]
            for task in ("masked", "denoise")}


def claims(res: Results, tolerance: float = MASKED_TOL) -> dict[str, bool]:
    """What the chapter states about a run of the bare model, as named booleans (the chapter and the tests call
    this one function on the live quick run and on the committed files).

    ``tolerance``: the share of the mean-digit baseline within which masked prediction counts as "no better than
    painting the mean digit" (:data:`MASKED_TOL`). Denoising must beat it by more than 2.5 times that share. A run
    that scored the per-pixel shrink (``baseline/denoise/p<patch>/shrink``; the committed files predate it) also
    states whether that no-learning baseline beats the bare model's denoising.
    """
    f, extra, T = res.final, res.extra, res.config["iterations"]
    base = {task: f[f"baseline/{task}/p{res.config['patch']}/mean_digit"] for task in ("masked", "denoise")}
    gap = margins(f, res.config["patch"])
    dn, bd = extra["bare/denoise/mse"], int(f["bare/denoise/best_t"])
    out = {
        "masked: the bare model's best MSE is within the tolerance of painting the mean digit":
            abs(gap["masked"]) <= tolerance * base["masked"],
        "masked: at its best t the prediction is within MSE 1e-3 of the mean digit":
            f["bare/masked/best/to_mean_digit"] < MEAN_DIGIT_TOL,
        "masked: across test digits a masked patch's prediction varies < 10% as much as the true patch":
            f["bare/masked/best/spread"] < 0.1 * f["bare/masked/best/true_spread"],
        "denoise: the bare model beats the mean digit by more than 2.5 x the tolerance":
            gap["denoise"] < -2.5 * tolerance * base["denoise"],
        "denoise: its error falls, then rises again (a transient memory)": 1 < bd < T and dn[T] > dn[bd] + 1e-3,
        "long time: the state is the mean digit (10x closer to it than to the input)":
            f["long/mse_to_mean_digit"] < 0.1 * f["long/mse_to_input"],
    }
    shrink = f.get(f"baseline/denoise/p{res.config['patch']}/shrink")
    if shrink is not None:
        out["denoise: a per-pixel linear shrink toward the mean digit (no learning) beats the bare model"] = \
            shrink < f["bare/denoise/best_mse"]
    return out


def decide_table(runs: dict[str, Results], shrink: dict[str, float] | None = None) -> list[dict]:
    """One row per run of the bare model: what it changed from ``runs["base"]``'s config, its masked and denoising
    scores beside the mean-digit and class-mean baselines, and how close its masked prediction is to the mean digit.
    ``margin``: (model - mean digit) / mean digit, negative when the model beats it.

    ``shrink``: optional {run name: denoising MSE of the per-pixel shrink baseline} (the committed files predate it;
    :func:`~energylab.experiments.attractor.score_baselines` computes it from a run's config). Given, each row also
    has ``denoise_shrink`` and ``denoise_vs_shrink`` = (model - shrink) / shrink (negative when the model beats it).
    """
    base = runs["base"].config
    rows = []
    for name, r in runs.items():
        f, p = r.final, r.config["patch"]
        changed = {k: v for k, v in r.config.items() if k not in ("seed", "device") and base.get(k) != v}
        row = {"run": name, "changed": ", ".join(f"{k}={v}" for k, v in changed.items()) or "(base)"}
        for task in ("masked", "denoise"):
            b = f[f"baseline/{task}/p{p}/mean_digit"]
            row.update({f"{task}": f[f"bare/{task}/best_mse"], f"{task}_mean_digit": b,
                        f"{task}_class_mean": f[f"baseline/{task}/p{p}/class_mean"],
                        f"{task}_margin": (f[f"bare/{task}/best_mse"] - b) / b})
        row.update(best_t=int(f["bare/masked/best_t"]), to_mean_digit=f["bare/masked/best/to_mean_digit"],
                   spread_ratio=f["bare/masked/best/spread"] / f["bare/masked/best/true_spread"])
        if shrink is not None:
            row.update(denoise_shrink=shrink[name], denoise_vs_shrink=(row["denoise"] - shrink[name]) / shrink[name])
        rows.append(row)
    return rows
