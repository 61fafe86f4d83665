"""Attention as repeated descent: iterate an operator while recording its energy.

Paper 000 (*Transformers as intrinsic optimizers*): a layer is one step z ← z + η·u(z) where u = −∇F* is the
operator of a free energy (:mod:`energylab.forms.free_energy`); a looped (weight-shared) layer repeats the step with the
same W (App. A.4). This module holds the generic pieces chapter 2 needs and that no single energy owns:

- :func:`iterate`: apply any update x ← step(x) K times and record the energy of every state (the one loop
  behind looped layers and Hopfield retrieval, :func:`energylab.experiments.hopfield.retrieve`);
- :func:`descend`: iterate any operator (optionally projected onto the sphere) and record the energy per step;
- :func:`multihead_sphere_instance` and :func:`multihead_attention`: an instance satisfying the hypothesis of
  Theorem 2 and the multi-head layer of eq. (11), assembled from the single-head
  :func:`~energylab.forms.free_energy.attention_step` with W_{Q,h}ᵀW_{K,h} = W_{1,h}ᵀW_{2,h} and W_{O,h}W_{V,h}
  = (η/H) W_{1,h}ᵀW_{2,h}.

Algorithm 1 (training as alternating optimisation) is an experiment: :mod:`energylab.experiments.alternating`.

Shapes: N tokens (the rows of H), d dim, heads heads, d_h = d/heads, M samples, C classes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from energylab._checks import (
    check_divides,
    check_int,
    check_positive,
    check_tensor,
)
from energylab.forms.free_energy import attention_step
from energylab.sphere import sphere_step

__all__ = ["Descent", "iterate", "descend", "multihead_sphere_instance", "multihead_attention", "BELOW_BOUND",
           "ABOVE_BOUND"]

# the step sizes, as multiples of a sphere step bound (2ρ / max_i |W h_i| for the dot product, 2 / (T Δλ) for linear
# attention), at which tests/test_descent.py and chapter 2 check that a projected loop descends (below) and overshoots
# (above): the bounds are heuristics, so both sides are checked with a margin
BELOW_BOUND = 0.9
ABOVE_BOUND = 3.0


# ----------------------------------------------------------------------------- iterating an operator
@dataclass
class Descent:
    """A run of x_{k+1} = step(x_k): ``states`` (K+1, *x.shape) and ``energies`` (K+1, *e.shape) = E(x_k), where e
    is what the energy returns for one state (a scalar, or one value per query)."""

    states: torch.Tensor
    energies: torch.Tensor

    def increases(self, tol: float = 1e-12) -> int:
        """How many steps raised the energy by more than ``tol`` (relative to the magnitude of E), counted per
        entry when the energy has one value per query."""
        e = self.energies
        return int(((e[1:] - e[:-1]) > tol * e[:-1].abs().clamp_min(1.0)).sum())


def iterate(step: Callable[[torch.Tensor], torch.Tensor], energy: Callable[[torch.Tensor], torch.Tensor],
            x0: torch.Tensor, steps: int) -> Descent:
    """x_{k+1} = step(x_k) for k < ``steps``, recording every state and its energy E(x_k), under ``no_grad``.

    ``energy(x)`` may return a scalar or one value per query (then :meth:`Descent.increases` counts per query).
    """
    x, states, values = x0, [], []
    with torch.no_grad():
        for k in range(steps + 1):
            states.append(x)
            values.append(energy(x))
            if k == steps:
                break
            x = step(x)
    return Descent(torch.stack(states), torch.stack(values))


def descend(update: Callable[[torch.Tensor], torch.Tensor], energy: Callable[[torch.Tensor], torch.Tensor],
            x0: torch.Tensor, eta: float, steps: int, sphere: bool = False) -> Descent:
    """Iterate x ← x + η·update(x) (or the projected :func:`~energylab.sphere.sphere_step` when ``sphere``).

    ``energy(x)`` may return one value per query; the recorded energy is their sum. Nothing is differentiated:
    the operator is the closed form, so the trajectory is exactly what a looped layer computes.
    """
    check_tensor("x0", x0)
    eta = check_positive("eta", eta)
    steps = check_int("steps", steps, minimum=0)

    def step(x):
        u = update(x)
        return sphere_step(x, u, eta) if sphere else x + eta * u

    return iterate(step, lambda x: energy(x).sum(), x0.detach().clone(), steps)


# ----------------------------------------------------------------------------- Theorem 2 (multi-head)
def multihead_sphere_instance(n_tokens: int, dim: int, heads: int, rho: float = 1.0, queries: int = 1,
                              generator: torch.Generator | None = None, dtype=torch.float64):
    """Random z (queries, d), H (N, d), W1, W2 (heads, d_h, d) with ‖W_{1,h} z‖ = ‖W_{2,h} h_i‖ = ρ for all h, i.

    The hypothesis of paper 000, Theorem 2. The rows of all W_{1,h} together form a random rotation, so
    Σ_h W_{1,h}ᵀW_{1,h} = I; W2 is a random well-conditioned matrix split into heads.
    """
    n_tokens, dim = check_int("n_tokens", n_tokens, minimum=1), check_int("dim", dim, minimum=1)
    heads = check_divides("heads", heads, dim)
    rho = check_positive("rho", rho)
    dh = dim // heads

    def on_spheres(n):  # (n, d): each head's block has norm ρ
        u = torch.randn(n, heads, dh, generator=generator, dtype=dtype)
        return (rho * u / u.norm(dim=-1, keepdim=True)).reshape(n, dim)

    W1 = torch.linalg.qr(torch.randn(dim, dim, generator=generator, dtype=dtype))[0]  # (d, d) orthogonal
    W2 = torch.eye(dim, dtype=dtype) + 0.3 * torch.randn(dim, dim, generator=generator, dtype=dtype) / dim ** 0.5
    z = on_spheres(queries) @ W1  # W1 z = blocks of norm ρ (W1 orthogonal: z = W1ᵀ u)
    H = torch.linalg.solve(W2, on_spheres(n_tokens).T).T  # W2 h_i = blocks of norm ρ
    return z, H, W1.reshape(heads, dh, dim), W2.reshape(heads, dh, dim)  # (heads, d_h, d)


def multihead_attention(z: torch.Tensor, H: torch.Tensor, W_QK: torch.Tensor, W_OV: torch.Tensor, T) -> torch.Tensor:
    """MHA(z) = z + Σ_h Σ_i softmax_i(zᵀ W_QK,h h_i / T) W_OV,h h_i (paper 000, eq. 11).

    W_QK, W_OV: (heads, d, d), the products W_{Q,h}ᵀW_{K,h} and W_{O,h}W_{V,h}. Each head is the library's
    single-head :func:`~energylab.forms.free_energy.attention_step` minus its residual. z: (..., d)  ->  (..., d).
    """
    check_tensor("W_QK", W_QK, ndim=3)
    check_tensor("W_OV", W_OV, ndim=3)
    if W_QK.shape != W_OV.shape:
        raise ValueError(f"W_OV must have the shape of W_QK {tuple(W_QK.shape)}, got {tuple(W_OV.shape)}")
    out = z
    for qk, ov in zip(W_QK, W_OV):
        out = out + (attention_step(z, H, qk, ov, T) - z)
    return out
