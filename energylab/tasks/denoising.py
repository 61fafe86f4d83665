"""In-context denoising on spheres (Smart, Bietti and Sengupta, ICML 2025, their "manifold" case), with its
Bayes-optimal answer in closed form.

A prompt is drawn as follows: a random d-dimensional subspace of Rⁿ (orthonormal basis U, n × d), L + 1 points
uniform on the sphere of radius R in it (x_i = R U s_i, s_i uniform on S^{d−1}), and the last one corrupted by
isotropic noise, x̃ = x_{L+1} + σ z with z ~ N(0, Iₙ). The model sees the L clean context tokens and x̃ and must
return x_{L+1}. Smart et al.'s settings: n = 16, d = 8, R = 1, σ² = 0.1, L = 500.

Bayes-optimal estimator (knowing U, R and σ², which a long context reveals). The posterior of s given x̃ is
p(s | x̃) ∝ exp(−‖x̃ − R U s‖² / 2σ²) ∝ exp(κ μᵀ s) on S^{d−1}, with y = Uᵀx̃, κ = R‖y‖/σ² and μ = y/‖y‖: a von
Mises–Fisher law, whose mean is A_d(κ) μ with A_d(κ) = I_{d/2}(κ) / I_{d/2−1}(κ) (a ratio of modified Bessel
functions of the first kind). So

    E[x | x̃] = R A_d(κ) U μ,                     κ = R ‖Uᵀx̃‖ / σ².

The empirical version, with the context standing in for the sphere (each x_i equally likely a priori), is
E[x | x̃] ≈ Σ_i w_i x_i with w_i ∝ exp(−‖x̃ − x_i‖²/2σ²) = softmax_i(x_iᵀx̃/σ²) up to a factor common to all i
(every ‖x_i‖ = R): one step of softmax attention, or of chapter 3's Hopfield update at β = 1/σ², with the context
as memories and the noisy token as the query.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from energylab._checks import check_int, check_positive

__all__ = ["Prompts", "sphere_prompts", "bessel_ratio", "sphere_posterior_mean", "squared_error"]


class Prompts(NamedTuple):
    context: torch.Tensor  # (B, L, n) the clean tokens x_1..x_L
    query: torch.Tensor  # (B, n) the noisy token x̃
    target: torch.Tensor  # (B, n) the clean x_{L+1}
    basis: torch.Tensor  # (B, n, d) the orthonormal basis U of each prompt's subspace


def sphere_prompts(count: int, n: int = 16, d: int = 8, context: int = 500, sigma2: float = 0.1,
                   radius: float = 1.0, generator: torch.Generator | None = None,
                   dtype: torch.dtype = torch.float32) -> Prompts:
    """``count`` prompts of the sphere task (module docstring): each its own random subspace. Drawn in float64 from
    ``generator`` (the same prompts for a given seed in any dtype), returned in ``dtype``."""
    count = check_int("count", count, minimum=1)
    n = check_int("n", n, minimum=2)
    d = check_int("d", d, minimum=2)
    if d > n:
        raise ValueError(f"the subspace dimension d = {d} must be at most the ambient dimension n = {n}")
    context = check_int("context", context, minimum=1)
    sigma2 = check_positive("sigma2", sigma2)
    radius = check_positive("radius", radius)
    f64 = torch.float64
    basis, _ = torch.linalg.qr(torch.randn(count, n, d, generator=generator, dtype=f64))  # (B, n, d) orthonormal
    s = torch.randn(count, context + 1, d, generator=generator, dtype=f64)
    s = s / s.norm(dim=-1, keepdim=True)  # uniform on S^{d-1}
    x = radius * s @ basis.transpose(1, 2)  # (B, L + 1, n)
    noise = math.sqrt(sigma2) * torch.randn(count, n, generator=generator, dtype=f64)
    return Prompts(x[:, :-1].to(dtype), (x[:, -1] + noise).to(dtype), x[:, -1].to(dtype), basis.to(dtype))


def bessel_ratio(d: int, kappa: torch.Tensor, terms: int = 400) -> torch.Tensor:
    """A_d(κ) = I_{d/2}(κ) / I_{d/2−1}(κ), the mean length of a von Mises–Fisher law on S^{d−1}, for κ ≥ 0 (float64).

    Gauss's continued fraction I_ν/I_{ν−1} = 1 / (2ν/κ + 1 / (2(ν+1)/κ + ...)), evaluated from the tail (``terms``
    levels: the tail's error shrinks like (κ/2k)^k, below float64's resolution for κ ≤ 100 at 400 levels). A_d(0) = 0,
    A_d(κ) → 1 as κ → ∞; for d = 3 it is coth κ − 1/κ."""
    d = check_int("d", d, minimum=2)
    kappa = torch.as_tensor(kappa, dtype=torch.float64)
    if not bool(torch.isfinite(kappa).all()) or bool((kappa < 0).any()):
        raise ValueError("kappa must be finite and non-negative")
    nu = d / 2
    k = kappa.clamp_min(1e-300)
    tail = torch.zeros_like(k)
    for j in range(terms, -1, -1):  # from the deepest level up: t_j = 1 / (2(ν+j)/κ + t_{j+1})
        tail = 1.0 / (2 * (nu + j) / k + tail)
    return torch.where(kappa > 0, tail, torch.zeros_like(tail))


def sphere_posterior_mean(query: torch.Tensor, basis: torch.Tensor, radius: float, sigma2: float) -> torch.Tensor:
    """E[x | x̃] = R A_d(κ) U y/‖y‖ with y = Uᵀx̃ and κ = R‖y‖/σ² (module docstring): the Bayes-optimal answer of
    the sphere task given the prompt's subspace. query (B, n), basis (B, n, d) -> (B, n), computed in float64."""
    q, U = query.double(), basis.double()
    y = torch.einsum("bnd,bn->bd", U, q)
    norm = y.norm(dim=-1, keepdim=True)
    kappa = radius * norm / sigma2
    direction = torch.einsum("bnd,bd->bn", U, y / norm.clamp_min(1e-300))
    return (radius * bessel_ratio(U.shape[-1], kappa) * direction).to(query.dtype)


def squared_error(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """‖prediction − target‖² per prompt, summed over the n coordinates: (B, n), (B, n) -> (B,)."""
    return (prediction - target).pow(2).sum(-1)
