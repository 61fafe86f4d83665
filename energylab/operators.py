"""Closed-form operators: the update each energy of :mod:`energylab.energies` induces.

An operator returns the *direction* of one step (−∇E, a Newton direction, or an approximation of one);
a layer is then x + η · update. Shapes as in :mod:`energylab.energies`: z (..., d), H (N, d), W (d, d).
The catalog (:mod:`energylab.catalog`) checks every operator against autograd on its energy.
"""
from __future__ import annotations

import torch

from energylab._checks import check_positive, check_tensor
from energylab.energies import (
    _mapped_tokens,
    boltzmann_weights,
    check_query_tokens,
    dot_product_potentials,
    elastic_potentials,
)

__all__ = [
    "dot_product_weights",
    "expressive_weights",
    "softmax_free_energy_update",
    "dot_product_free_energy_update",
    "attention_step",
    "tangent_projection",
    "sphere_step",
]


# ----------------------------------------------------------------------------- attention weights from scores
def _check_scores_mask(scores, mask) -> None:
    check_tensor("scores", scores)
    if scores.dim() < 1:
        raise ValueError(f"scores must have at least 1 dim (..., N), got shape {tuple(scores.shape)}")
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise TypeError("mask must be a boolean tensor (True where attention is allowed)")
        try:
            torch.broadcast_shapes(mask.shape, scores.shape)
        except RuntimeError:
            raise ValueError(
                f"mask shape {tuple(mask.shape)} does not broadcast to scores shape {tuple(scores.shape)}"
            ) from None


def dot_product_weights(scores: torch.Tensor, mask: torch.Tensor | None = None, beta=1.0) -> torch.Tensor:
    """Dot-product attention weights a_mk = exp(β s_mk) / Σ_k' exp(β s_mk') over the allowed k (paper 001, DPA).

    scores: (..., M, N) raw scores s_mk = q_mᵀ k_k; mask: boolean, broadcastable to scores, True where
    attention is allowed (a causal mask is ``torch.ones(N, N, dtype=bool).tril()``); beta > 0.
    Returns (..., M, N), each row summing to 1 over its allowed entries (rows must allow at least one entry).
    """
    _check_scores_mask(scores, mask)
    check_positive("beta", beta)
    logits = beta * scores
    if mask is not None:
        logits = logits.masked_fill(~mask, float("-inf"))
    return torch.softmax(logits, dim=-1)


def expressive_weights(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Expressive-attention weights a_mk = s_mk² / (1 + s_mk²) / N_m (paper 001, EA), N_m the (masked) row sum.

    The weight of a score is even in s: anti-aligned query/key pairs attend as strongly as aligned ones.
    scores: (..., M, N); mask as in :func:`dot_product_weights`. A row whose allowed scores are all exactly
    zero has no weight to normalise and returns zeros (the denominator is clamped at the smallest normal).
    """
    _check_scores_mask(scores, mask)
    s2 = scores * scores
    w = s2 / (1 + s2)  # z²/(1+z²) in [0, 1)
    if mask is not None:
        w = w.masked_fill(~mask, 0.0)
    return w / w.sum(-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)


# ----------------------------------------------------------------------------- paper 000: free energies
def softmax_free_energy_update(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """−∇_z F* = h̄ − z with h̄ = Σ_i p_i W h_i, p = Boltzmann weights of E_i = ½‖z − W h_i‖² (paper 000, eq. 8).

    A step z + η(h̄ − z) = (1 − η) z + η h̄ is eq. (8). z: (..., d)  ->  (..., d).
    """
    p = boltzmann_weights(elastic_potentials(z, H, W), T)  # (..., N)
    h_bar = torch.einsum("...i,ia->...a", p, _mapped_tokens(H, W))  # h̄ = Σ_i p_i W h_i
    return h_bar - z


def dot_product_free_energy_update(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """−∇_z F̃* = Σ_i p_i W h_i with p_i ∝ exp(zᵀ W h_i / T) (paper 000, proof of Theorem 1).

    Chain rule: F̃* = −T log Σ_i exp(zᵀW h_i/T) gives ∇_z F̃* = −T · (1/T) Σ_i p_i W h_i = −Σ_i p_i W h_i.
    One descent step of rate η is therefore attention (eq. 1) with W_QᵀW_K = W and **W_V = η W**. The paper's
    proof writes W_V = ηT W because it drops the inner factor 1/T when differentiating; with the temperature
    absorbed into learnable weights the conclusion (attention = one gradient step) is unchanged.
    z: (..., d)  ->  (..., d).
    """
    p = boltzmann_weights(dot_product_potentials(z, H, W), T)  # (..., N)
    return torch.einsum("...i,ia->...a", p, _mapped_tokens(H, W))


def attention_step(z: torch.Tensor, H: torch.Tensor, W_QK: torch.Tensor, W_V: torch.Tensor, T) -> torch.Tensor:
    """Atten(z) = z + Σ_i softmax_i(zᵀ W_QK h_i / T) W_V h_i (paper 000, eq. 1, with W_QK = W_QᵀW_K).

    z: (..., d), H: (N, d), W_QK, W_V: (d, d)  ->  (..., d).
    """
    check_query_tokens(z, H, W_QK)
    check_query_tokens(z, H, W_V)
    p = boltzmann_weights(dot_product_potentials(z, H, W_QK), T)  # softmax_i(zᵀW_QK h_i / T)
    return z + torch.einsum("...i,ia->...a", p, _mapped_tokens(H, W_V))


# ----------------------------------------------------------------------------- the sphere
def tangent_projection(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """P_x v = v − ⟨x̂, v⟩ x̂ row-wise, x̂ = x/‖x‖: the part of v tangent to the sphere through x (Geshkovski et al.).

    x, v: (..., d) of the same shape  ->  (..., d).
    """
    check_tensor("x", x)
    check_tensor("v", v)
    if x.shape != v.shape:
        raise ValueError(f"v must have the shape of x {tuple(x.shape)}, got {tuple(v.shape)}")
    x_hat = x / x.norm(dim=-1, keepdim=True)
    return v - (x_hat * v).sum(-1, keepdim=True) * x_hat


def sphere_step(x: torch.Tensor, update: torch.Tensor, eta: float) -> torch.Tensor:
    """Projected step on the sphere: x ← ‖x‖ · (x + η P_x u) / ‖x + η P_x u‖ (row-wise; keeps each ‖x_i‖)."""
    check_positive("eta", eta)
    y = x + eta * tangent_projection(x, update)
    return y * (x.norm(dim=-1, keepdim=True) / y.norm(dim=-1, keepdim=True))
