"""In-context denoising on spheres (energylab.tasks.denoising): the prompts, the Bessel ratio, the Bayes-optimal
posterior mean, and the identity that makes one softmax-attention step the empirical Bayes estimator."""
import math

import pytest
import torch

from energylab.tasks.denoising import bessel_ratio, sphere_posterior_mean, sphere_prompts, squared_error

F64 = torch.float64


def test_prompts_lie_on_spheres_in_their_subspaces_and_are_seeded():
    p = sphere_prompts(300, n=10, d=4, context=20, sigma2=0.2, radius=1.5, generator=torch.Generator().manual_seed(0),
                       dtype=F64)
    U = p.basis
    assert (U.transpose(1, 2) @ U - torch.eye(4, dtype=F64)).abs().max() < 1e-12  # orthonormal bases
    for x in (p.context, p.target[:, None]):
        assert (x.norm(dim=-1) - 1.5).abs().max() < 1e-12  # on the sphere of radius R
        assert (x - x @ U @ U.transpose(1, 2)).abs().max() < 1e-12  # in the prompt's subspace
    noise = p.query - p.target  # isotropic, variance σ² per coordinate: 3,000 draws, standard error 0.005
    assert noise.pow(2).mean().item() == pytest.approx(0.2, abs=0.02)
    again = sphere_prompts(300, n=10, d=4, context=20, sigma2=0.2, radius=1.5,
                           generator=torch.Generator().manual_seed(0))  # float32: the same draws, rounded once
    assert (again.query.double() - p.query).abs().max() < 1e-6
    with pytest.raises(ValueError, match="at most the ambient"):
        sphere_prompts(2, n=3, d=4)


def test_bessel_ratio_against_scipy_and_the_closed_form_at_d_3():
    scipy_special = pytest.importorskip("scipy.special")
    kappa = torch.tensor([1e-6, 0.3, 1.0, 4.0, 10.0, 37.0, 100.0], dtype=F64)
    for d in (2, 3, 8, 16):
        want = scipy_special.ive(d / 2, kappa.numpy()) / scipy_special.ive(d / 2 - 1, kappa.numpy())
        assert (bessel_ratio(d, kappa) - torch.from_numpy(want)).abs().max() < 1e-13
    k = kappa[1:]
    assert (bessel_ratio(3, k) - (1 / torch.tanh(k) - 1 / k)).abs().max() < 1e-13
    assert bessel_ratio(8, torch.tensor(0.0)) == 0
    with pytest.raises(ValueError, match="non-negative"):
        bessel_ratio(8, torch.tensor(-1.0))


def test_the_posterior_mean_is_the_mean_of_the_posterior_by_sampling():
    """Self-normalised importance sampling from the prior (uniform on the sphere): E[x | x̃] ≈ Σ w_k x_k with
    w_k ∝ exp(−‖x̃ − x_k‖²/2σ²), 200,000 prior draws for one prompt."""
    g = torch.Generator().manual_seed(3)
    p = sphere_prompts(1, n=6, d=3, context=1, sigma2=0.3, generator=g, dtype=F64)
    s = torch.randn(200_000, 3, generator=g, dtype=F64)
    x = (s / s.norm(dim=-1, keepdim=True)) @ p.basis[0].T
    w = torch.softmax(-(x - p.query[0]).pow(2).sum(-1) / (2 * 0.3), 0)
    sampled = w @ x
    exact = sphere_posterior_mean(p.query, p.basis, 1.0, 0.3)[0]
    assert (sampled - exact).abs().max() < 0.01


def test_one_softmax_step_at_beta_one_over_sigma2_is_the_empirical_posterior_mean():
    """With every context token at the same norm, the Gaussian-likelihood weights are softmax(β Xx̃), β = 1/σ²."""
    p = sphere_prompts(5, n=8, d=4, context=30, sigma2=0.1, generator=torch.Generator().manual_seed(1), dtype=F64)
    X, q = p.context, p.query
    w = torch.softmax(-(X - q[:, None]).pow(2).sum(-1) / (2 * 0.1), -1)
    step = torch.softmax(torch.einsum("bln,bn->bl", X, q) / 0.1, -1)
    assert (w - step).abs().max() < 1e-12


def test_the_bayes_estimate_beats_the_others_on_many_prompts():
    p = sphere_prompts(3000, n=16, d=8, context=50, sigma2=0.1, generator=torch.Generator().manual_seed(2),
                       dtype=F64)
    bayes = squared_error(sphere_posterior_mean(p.query, p.basis, 1.0, 0.1), p.target).mean()
    projected = torch.einsum("bnd,bmd,bm->bn", p.basis, p.basis, p.query)
    on_sphere = projected / projected.norm(dim=-1, keepdim=True)  # projection to the sphere, not shrunk
    for other in (projected, on_sphere, torch.zeros_like(p.query)):
        assert bayes < squared_error(other, p.target).mean() - 0.01
    assert squared_error(p.query, p.target).mean().item() == pytest.approx(16 * 0.1, rel=0.05)
    assert math.isfinite(bayes.item())
