"""Energy functions: potentials E_i(z, h_i), free energies and the global energies of every attention form.

Shapes (book/notation.md): N tokens, d dimension, H heads, d_h = d / H. A query z has shape (..., d)
(one query or a batch of queries), the attended tokens are the rows of H (N, d), and W is (d, d).
Every function is differentiable with autograd and float64-safe; the operators that these energies
induce live in :mod:`energylab.operators`, the pairs are registered in :mod:`energylab.catalog`.

Free-energy part: paper 000 (Transformers as intrinsic optimizers), eqs. (2)-(4) and Theorems 1-3.
"""
from __future__ import annotations

import torch

from energylab._checks import check_dim, check_positive, check_tensor

__all__ = [
    "elastic_potentials",
    "dot_product_potentials",
    "boltzmann_weights",
    "free_energy_of_weights",
    "helmholtz_free_energy",
    "softmax_free_energy",
    "dot_product_free_energy",
    "check_query_tokens",
]


def check_query_tokens(z, H, W) -> None:
    """Validate a query z (..., d), tokens H (N, d) and a square map W (d, d); errors name the argument."""
    check_tensor("z", z)
    if z.dim() < 1:
        raise ValueError(f"z must have at least 1 dim (..., d), got shape {tuple(z.shape)}")
    check_tensor("H", H, ndim=2)
    check_tensor("W", W, ndim=2)
    d = z.shape[-1]
    check_dim("H", H.shape[-1], d)
    if W.shape != (d, d):
        raise ValueError(f"W must have shape ({d}, {d}) to match z, got {tuple(W.shape)}")


def _mapped_tokens(H: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """The rows W h_i: (N, d)."""
    # (W h_i)_a = sum_b W_ab H_ib
    return torch.einsum("ab,ib->ia", W, H)


def elastic_potentials(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Elastic potentials E_i = ½‖z − W h_i‖² (paper 000, Theorem 1).

    z: (..., d), H: (N, d), W: (d, d)  ->  E: (..., N).
    """
    check_query_tokens(z, H, W)
    r = z.unsqueeze(-2) - _mapped_tokens(H, W)  # (..., N, d): r_i = z − W h_i
    return 0.5 * r.pow(2).sum(-1)


def dot_product_potentials(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Inner-product potentials E_i = −zᵀ W h_i (paper 000, Table 1 and Theorem 3).

    z: (..., d), H: (N, d), W: (d, d)  ->  E: (..., N).
    """
    check_query_tokens(z, H, W)
    # E_i = − sum_a z_a (W h_i)_a
    return -torch.einsum("...a,ia->...i", z, _mapped_tokens(H, W))


def boltzmann_weights(E: torch.Tensor, T) -> torch.Tensor:
    """Boltzmann weights p_i = exp(−E_i/T) / Z over the last dim (paper 000, Lemma 1).

    E: (..., N), T > 0 (a number or a tensor broadcastable to E[..., :1])  ->  p: (..., N).
    """
    check_tensor("E", E)
    check_positive("T", T)
    return torch.softmax(-E / T, dim=-1)


def free_energy_of_weights(p: torch.Tensor, E: torch.Tensor, T) -> torch.Tensor:
    """Free energy of an arbitrary distribution p: F = Σ p_i E_i + T Σ p_i log p_i = U − TS (paper 000, eq. 2).

    p, E: (..., N) with p on the simplex (0 log 0 = 0)  ->  F: (...).
    """
    check_tensor("p", p)
    check_tensor("E", E)
    check_positive("T", T)
    if p.shape != E.shape:
        raise ValueError(f"p must have the shape of E {tuple(E.shape)}, got {tuple(p.shape)}")
    if (p < 0).any():
        raise ValueError("p must be non-negative")
    internal_energy = (p * E).sum(-1)  # U = Σ_i p_i E_i
    neg_entropy = torch.special.xlogy(p, p).sum(-1)  # −S = Σ_i p_i log p_i
    return internal_energy + T * neg_entropy


def helmholtz_free_energy(E: torch.Tensor, T) -> torch.Tensor:
    """Helmholtz free energy F* = −T log Σ_i exp(−E_i/T) (paper 000, eq. 3), the minimum of eq. (2) over p.

    Computed with logsumexp, so it is finite for any finite E. E: (..., N)  ->  F*: (...).
    """
    check_tensor("E", E)
    check_positive("T", T)
    return -T * torch.logsumexp(-E / T, dim=-1)


def softmax_free_energy(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """F* = −T log Σ_i exp(−½‖z − W h_i‖²/T) (paper 000, eq. 4). z: (..., d)  ->  (...) one value per query."""
    return helmholtz_free_energy(elastic_potentials(z, H, W), T)


def dot_product_free_energy(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """F̃* = −T log Σ_i exp(zᵀ W h_i / T), the dot-product free energy (paper 000, proof of Theorem 1).

    On the sphere ‖z‖ = ‖W h_i‖ = ρ it differs from F* by the constant ρ²: F* = F̃* + ρ².
    z: (..., d)  ->  (...).
    """
    return helmholtz_free_energy(dot_product_potentials(z, H, W), T)
