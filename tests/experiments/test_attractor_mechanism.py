"""Chapter 7, section 7.5: what the couplings become with training (cos(J, C)) and when the masked prediction falls
onto the mean digit, measured by energylab.experiments.attractor_mechanism.coupling_mechanism, the function the
chapter calls (here on a small setting; the chapter runs the 20-epoch base setting of section 7.8)."""
import dataclasses

import pytest
import torch

from energylab.engine.runs import config_record
from energylab.experiments import attractor as ex
from energylab.experiments import attractor_mechanism as mechanism
from energylab.models import attractor as at
from energylab.tasks import images as im

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def small():
    cfg = dataclasses.replace(ex.PROFILES["quick"], n_train=320, n_eval=24, iterations=8, baseline=False)
    return cfg, ex.load_data(cfg)


def test_alignment_is_the_cosine_with_the_data_correlations_in_float64(small):
    cfg, data = small
    model, _ = ex.train_bare(dataclasses.replace(cfg, epochs=1), data, CPU)
    spins = im.pixels_to_spins(im.patchify(data.train, cfg.patch))
    C = at.correlation_couplings(model.embed(spins).double())
    J = model.J.detach().double()
    want = float((J * C).sum() / (J.norm() * C.norm()))
    assert abs(mechanism.coupling_alignment(model, spins) - want) < 1e-12
    with torch.no_grad():
        model.J.copy_(at.correlation_couplings(model.embed(spins)))
    assert abs(mechanism.coupling_alignment(model, spins) - 1.0) < 1e-7  # Hebbian couplings (float32): cos = 1


def test_mechanism_rows_are_the_k_epoch_runs(small):
    """One 2-epoch run measured after epochs 1 and 2 gives what separate 1- and 2-epoch runs give (the schedule
    depends on the step only), and the rows' curves are bare_curve's."""
    cfg, data = small
    out = mechanism.coupling_mechanism(cfg, data, CPU, epochs=(1, 2))
    assert list(out["epochs"]) == [1, 2]
    spins = im.pixels_to_spins(im.patchify(data.train, cfg.patch))
    test = data.test[:cfg.n_eval]
    mean_p = im.patchify(data.train.mean(0, keepdim=True), cfg.patch)
    for k, row in out["epochs"].items():
        model, _ = ex.train_bare(dataclasses.replace(cfg, epochs=k), data, CPU)
        model.eval()
        assert row["cos_JC"] == pytest.approx(mechanism.coupling_alignment(model, spins), abs=1e-6)
        curve, pix, target, mask = ex.bare_curve(model, cfg, test, "masked", cfg.iterations)
        assert row["mse"] == pytest.approx(curve, abs=1e-7) and len(row["mse"]) == cfg.iterations + 1
        to_mean = [float(im.masked_mse(p, mean_p.expand_as(p), mask).mean()) for p in pix]
        assert row["to_mean_digit"] == pytest.approx(to_mean, abs=1e-7)
        below = [t for t in range(1, len(to_mean)) if to_mean[t] < mechanism.MEAN_DIGIT_TOL]
        assert row["collapse_t"] == (below[0] if below else None)
        assert out["mean_digit"] == pytest.approx(float(im.masked_mse(mean_p.expand_as(target), target, mask).mean()))
    with pytest.raises(ValueError, match="epochs"):
        mechanism.coupling_mechanism(cfg, data, CPU, epochs=(0,))


def test_score_baselines_and_config_of(small):
    cfg, data = small
    assert mechanism.config_of(config_record(cfg)) == cfg
    scores = ex.score_baselines(cfg, data, cfg.patch, cfg.n_eval)
    assert set(scores["masked"]) == {"mean_digit", "class_mean"}
    assert set(scores["denoise"]) == {"mean_digit", "class_mean", "shrink"}
    # the shrink reads the noisy input: it beats painting the mean digit on these digits
    assert scores["denoise"]["shrink"] < scores["denoise"]["mean_digit"]
