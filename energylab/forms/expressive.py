"""Expressive attention (paper 001, Gros 2024): weights s²/(1+s²) and their energy; one family of the catalog.

EA's weights are exactly the Boltzmann weights of the potentials E_i = −T log(s_i²/(1+s_i²)), s_i = zᵀW h_i, so EA
has a free energy F_EA; its gradient is not the EA layer (the gradient carries an extra factor). Here: the
weights of raw scores, the potentials, F_EA and −∇F_EA, one EA step, the sampler and the ``register`` call.

The EA layer (:class:`energylab.layers.ExpressiveAttention`) runs the tiled kernel
:func:`energylab.kernels.attention.expressive_attention`, which gives the numbers of
``expressive_weights(q @ k.mT, mask) @ v`` without keeping the (M, N) weights.

Shapes (book/notation.md): z (..., d), H (N, d), W (d, d); scores (..., M, N).
"""
from __future__ import annotations

import torch

from energylab._checks import check_positive, value_checks_off
from energylab.catalog import AttentionForm, Equation, register
from energylab.forms._common import check_query_tokens, check_scores_mask, mapped_tokens
from energylab.forms.free_energy import dot_product_potentials, sample_free_tokens

# the chapter that derives this family's forms (a form derived elsewhere names its own)
CHAPTER = "05_expressive_attention"
# the Atlas (chapter 11) groups this module's forms under this title
FAMILY = "Expressive attention"

__all__ = ["expressive_weights", "expressive_potentials", "expressive_free_energy", "expressive_free_energy_update",
           "expressive_attention_step"]


# ----------------------------------------------------------------------------- weights
def expressive_weights(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Expressive-attention weights a_mk = s_mk² / (1 + s_mk²) / N_m (paper 001, EA), N_m the (masked) row sum.

    The weight of a score is even in s: anti-aligned query/key pairs attend as strongly as aligned ones.
    scores: (..., M, N); mask as in :func:`dot_product_weights`. A row whose allowed scores are all exactly
    zero (or that is fully masked) has no weight to normalise and returns zeros (the denominator is clamped
    at the smallest normal); we chose zeros over uniform weights because s → 0 has no unique limit (along
    s = t·u the weights tend to u_k²/Σ_j u_j²) and the fused layer kernel does the same. A score whose square
    overflows gets the raw weight 1, its limit.
    """
    check_scores_mask(scores, mask)
    return _expressive_weights(scores, mask)


def _expressive_weights(scores, mask=None):
    """:func:`expressive_weights` without validation (for layers' hot paths)."""
    s2 = _squared_scores(scores)
    w = s2 / (1 + s2)  # z²/(1+z²) in [0, 1]
    if mask is not None:
        w = w.masked_fill(~mask, 0.0)
    return w / w.sum(-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)


def _squared_scores(s: torch.Tensor) -> torch.Tensor:
    """s², clamped at the largest finite value: where s² overflows, s²/(1+s²) is then exactly 1 (not inf/inf)."""
    return (s * s).clamp_max(torch.finfo(s.dtype).max)


# ----------------------------------------------------------------------------- energy and operators
def expressive_potentials(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """E_i = −T log(s_i² / (1 + s_i²)), s_i = zᵀ W h_i: the potentials whose Boltzmann weights are EA's weights.

    exp(−E_i/T) = s_i²/(1+s_i²), so boltzmann_weights(E, T) = expressive_weights(s) exactly (paper 001).
    z: (..., d)  ->  (..., N); +inf where s_i = 0 (that token gets weight 0), 0 where s_i² overflows.
    """
    T = check_positive("T", T)
    s = -dot_product_potentials(z, H, W)
    # s² formed twice, as autograd has always seen it (one shared node would change gradients in the last bit)
    return -T * (torch.log(_squared_scores(s)) - torch.log1p(_squared_scores(s)))


def expressive_free_energy(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """F_EA = −T log Σ_i s_i²/(1 + s_i²), the Helmholtz free energy of :func:`expressive_potentials`. -> (...).

    +inf for a query whose scores s_i = zᵀW h_i are all zero (exp(−F_EA/T) = Σ_i w_i = 0 there).
    """
    T = check_positive("T", T)
    s = -dot_product_potentials(z, H, W)
    return -T * torch.log((_squared_scores(s) / (1 + _squared_scores(s))).sum(-1))  # s² twice: see above


def expressive_free_energy_update(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """−∇_z F_EA = T Σ_i p_i · 2/(s_i(1+s_i²)) · W h_i, p = EA weights, s_i = zᵀW h_i (paper 001 weights).

    Written as T Σ_i 2 s_i / ((1+s_i²)² Σ_j w_j) W h_i, which is smooth at s_i = 0. This is *not* the EA layer
    Σ_i p_i W_V h_i: the Boltzmann weights are EA's exactly, the gradient carries the extra factor
    2/(s_i(1+s_i²)). z: (..., d)  ->  (..., d). A query whose scores are all 0 (z, H or W zero) has F_EA = +inf
    and no gradient: ValueError naming z.
    """
    T = check_positive("T", T)
    s = -dot_product_potentials(z, H, W)  # (..., N)
    s2 = _squared_scores(s)
    w_sum = (s2 / (1 + s2)).sum(-1, keepdim=True)
    if not value_checks_off() and (w_sum == 0).any():
        raise ValueError("z: every score s_i = zᵀW h_i of a query is 0 (z, H or W is zero), where F_EA = +inf "
                         "and its gradient is undefined")
    coef = 2 * s / ((1 + s2).pow(2) * w_sum)
    return T * torch.einsum("...i,ia->...a", coef, mapped_tokens(H, W))


def expressive_attention_step(z: torch.Tensor, H: torch.Tensor, W_QK: torch.Tensor, W_V: torch.Tensor) -> torch.Tensor:
    """EA(z) = z + Σ_i [s_i²/(1+s_i²) / Σ_j s_j²/(1+s_j²)] W_V h_i, s_i = zᵀ W_QK h_i (paper 001, with a residual).

    A query whose scores are all 0 gets zero weights (see :func:`expressive_weights`), so EA(z) = z there.
    """
    check_query_tokens(z, H, W_QK)
    check_query_tokens(z, H, W_V)
    p = expressive_weights(-dot_product_potentials(z, H, W_QK))
    return z + torch.einsum("...i,ia->...a", p, mapped_tokens(H, W_V))


# ----------------------------------------------------------------------------- the catalog
register(AttentionForm(
    chapter=CHAPTER,
    name="expressive_attention", paper="gros2024expressive", kind="gradient",
    equation=Equation(r"F_{EA} = -T\log\sum_i \frac{s_i^2}{1+s_i^2},\ s_i = z^\top W h_i",
                      r"-\nabla_z F_{EA} = T\sum_i p_i\,\frac{2}{s_i(1+s_i^2)}\,W h_i"),
    energy=lambda z, H, W, T: expressive_free_energy(z, H, W, T).sum(),
    update=expressive_free_energy_update, sample=sample_free_tokens,
    note="Exact: EA's weights p_i are the Boltzmann weights of E_i = −T log(s_i²/(1+s_i²)) (Lemma 1 holds). "
    "Not exact: the EA layer Σ_i p_i W_V h_i is not −∇F_EA (the gradient carries 2/(s_i(1+s_i²))).",
))
