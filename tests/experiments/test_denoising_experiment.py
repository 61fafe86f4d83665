"""The in-context denoising experiment (energylab.experiments.denoising): its rows and baselines, the two-parameter
fit, and resuming."""
import dataclasses

import pytest
import torch

from energylab.experiments import denoising as D
from energylab.tasks.denoising import sphere_prompts, squared_error

TINY = dataclasses.replace(D.PROFILES["quick"], contexts=(30,), n_train=160, n_test=40, epochs=3, seeds=(0,),
                           kinds=("softmax", "sparsemax"), progress=False, device="cpu")


def test_a_tiny_run_scores_every_estimator_on_the_same_prompts(tmp_path):
    r = D.run(TINY, out_dir=str(tmp_path / "run"))
    names = {row["estimator"] for row in r.tables["scores"]}
    assert names == set(D.BASELINES) | {"trained (softmax)", "trained (sparsemax)"}
    f = r.final
    assert f["30/zero"] == pytest.approx(1.0, rel=0.3) and f["30/noisy query"] > f["30/zero"]  # ‖x‖ = 1; n σ² = 1.6
    assert f["30/bayes"] < min(v for k, v in f.items() if k != "30/bayes")  # the posterior mean is best
    assert {row["kind"] for row in r.tables["weights"]} == {"softmax", "sparsemax"}
    assert len(r.histories) == 2
    again = D.run(TINY, out_dir=str(tmp_path / "run"), resume=True)  # finished models are loaded, not retrained
    assert again.final == r.final


def test_the_two_parameter_fit_is_the_best_scaled_identity_on_its_prompts():
    p = sphere_prompts(200, n=16, d=8, context=60, sigma2=0.1, generator=torch.Generator().manual_seed(0))
    beta, alpha = D.fit_scaled_step(p)
    assert beta in D.BETA_GRID and alpha > 0

    def mse(b, a):
        return float(squared_error(a * D.softmax_step(p, b), p.target.double()).mean())

    best = mse(beta, alpha)
    assert best <= mse(10.0, 1.0) and best <= mse(beta, 1.0)
    assert all(best <= mse(b, alpha) + 1e-12 for b in D.BETA_GRID[::7])
