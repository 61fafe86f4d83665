"""MHA2nd1st and its corrected form: a Newton-like step on the multi-head free energy (paper 002;
:mod:`energylab.forms.newton`).

Every layer maps x (B, N, d) -> (B, N, d) and returns its update without the residual (see
:mod:`energylab.layers`)."""
from __future__ import annotations

import math

import torch
from torch import nn

from energylab import catalog, kernels
from energylab._checks import (
    check_positive,
    value_checks_off,
)
from energylab.forms._common import mask_rows, merge_heads, row_blocks, split_heads
from energylab.forms.newton import newton_first_order_direction, ridge_inverse
from energylab.kernels import attention as fa
from energylab.kernels import fused_attention as fz
from energylab.layers._common import causal_mask, check_input, check_sizes

__all__ = ["MHA2nd1st", "MHA2nd1stCorrected"]


class MHA2nd1st(nn.Module):
    """Newton-inspired attention, Σ_h W_{O,h}[(q_h − k̄_h) + b_h] (paper 000, App. A.8, eqs. 29-31).

    p_{j,h} = softmax_j(q_hᵀk_{j,h}/T_h), k̄_h = Σ_j p_{j,h}k_{j,h}, G_h = W_{Q,h}W_{Q,h}ᵀ,
    b_h = G_h⁻¹(1/T'_h)[Σ_j p_{j,h} k_{j,h}(k_{j,h}ᵀu_h) − k̄_h(k̄_hᵀu_h)], u_h = G_h(q_h − k̄_h).
    No value map: 3d² attention parameters (W_Q, W_K, W_O) plus 2H temperatures. T_h, T'_h are learnable per
    head, initialised to d_h and kept positive through a log parametrisation (our choice). G_h⁻¹ is computed
    as (G_h + ridge·I)⁻¹ in float32: the paper does not say how G_h is stabilised; a small ridge is ours.
    Args: dim, heads, causal, ridge (≥ 0).
    """

    def __init__(self, dim: int, heads: int, causal: bool = True, ridge: float = 1e-4):
        super().__init__()
        dim, heads = check_sizes(dim, heads)
        ridge = check_positive("ridge", ridge, allow_zero=True, scalar=True)
        self.dim, self.heads, self.causal, self.ridge = dim, heads, bool(causal), ridge
        d_h = dim // heads
        self.query = nn.Linear(dim, dim, bias=False)  # rows h·d_h..(h+1)·d_h are W_{Q,h}
        self.key = nn.Linear(dim, dim, bias=False)  # W_{K,h} likewise
        self.out = nn.Linear(dim, dim, bias=False)  # W_O = [W_{O,1} ... W_{O,H}] (d, H·d_h): W_Oᵀ is (H, d_h, d)
        self.log_temperature = nn.Parameter(torch.full((heads,), math.log(d_h)))  # log T_h
        self.log_temperature_b = nn.Parameter(torch.full((heads,), math.log(d_h)))  # log T'_h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(x, self.dim, self.query.weight)
        q = split_heads(self.query(x), self.heads)  # (B, H, N, d_h)
        k = split_heads(self.key(x), self.heads)
        if q.dtype == torch.float16:  # b_h is cubic in q, k: float16 (largest 65504) overflows to NaN at modest scales
            return self.out(self._direction_in_float32(q, k, x))
        T = self.log_temperature.exp().to(x.dtype).view(-1, 1, 1)  # (H, 1, 1)
        T_b = self.log_temperature_b.exp().to(x.dtype).view(-1, 1, 1)
        mask = causal_mask(x.shape[1], x.device) if self.causal else None
        G, G_inv = self._metric()
        return self.out(self._direction(q, k, T, T_b, G, G_inv, mask))

    def _direction_in_float32(self, q, k, x):
        """The merged direction (B, N, d) of float16 projections, computed in float32 and returned in float16; a
        direction beyond float16's range raises ValueError (it would be inf, then NaN, after W_O)."""
        T = self.log_temperature.float().exp().view(-1, 1, 1)
        T_b = self.log_temperature_b.float().exp().view(-1, 1, 1)
        mask = causal_mask(x.shape[1], x.device) if self.causal else None
        G, G_inv = self._metric(torch.float32)
        direction = self._direction(q.float(), k.float(), T, T_b, G, G_inv, mask)
        largest = torch.finfo(torch.float16).max
        if not value_checks_off() and bool(direction.detach().abs().amax() > largest):
            raise ValueError(f"x: {type(self).__name__}'s direction (q − k̄) + b reaches "
                             f"{float(direction.detach().abs().amax()):.3g} here, beyond float16's largest value "
                             f"{largest:g}; run the layer in float32, float64 or bfloat16")
        return direction.to(q.dtype)

    def _direction(self, q, k, T, T_b, G, G_inv, mask):
        """The merged direction (B, N, d) from the heads' q, k (B, H, N, d_h): the tiled kernel on the CPU
        (no (N, N) tensor kept for the backward pass), else cache-sized query blocks of the reference ops."""
        if fz.usable(q, "fused-newton"):  # the tile loop in C, reading the heads in place (issue 55)
            G, G_inv = (None if M is None else M.to(q.dtype) for M in (G, G_inv))
            return merge_heads(fz.newton(q, k, T.view(-1), T_b.view(-1), G, G_inv, causal=mask is not None))
        if kernels.tiled(q):
            return merge_heads(self._fast(q, k, T, T_b, G, G_inv, mask))
        k_t = k.transpose(-1, -2)  # (B, H, d_h, N)
        blocks = []
        for rows in row_blocks(q.shape[-2], k.shape[-2], q.shape[0] * q.shape[1]):  # cache-sized query blocks
            logits = q[..., rows, :] @ k_t / T  # (B, H, n, N): q_hᵀk_{j,h} / T_h
            block_mask = mask_rows(mask, rows)
            if block_mask is not None:
                logits = logits.masked_fill(~block_mask, float("-inf"))  # causal: no row is fully masked
            weights = torch.softmax(logits, dim=-1)  # p_{j,h}
            blocks.append(newton_first_order_direction(q[..., rows, :], k, weights, G, T_b, self.ridge, G_inv))
        direction = torch.cat(blocks, dim=-2)  # (B, H, N, d_h)
        return merge_heads(direction)

    @staticmethod
    def _fast(q, k, T, T_b, G, G_inv, mask):
        """:func:`energylab.kernels.attention.newton_direction` on (B·H, N, d_h), per-head T, G broadcast over B."""
        per_head = lambda t: None if t is None else t.to(q.dtype).expand(q.shape[0], *t.shape).flatten(0, 1)  # noqa: E731
        y = fa.newton_direction(q.flatten(0, 1), k.flatten(0, 1), per_head(T), per_head(T_b), per_head(G),
                                per_head(G_inv), mask)
        return y.view_as(q)

    def _metric(self, dtype: torch.dtype | None = None):
        """G_h = W_{Q,h}W_{Q,h}ᵀ (H, d_h, d_h) and (G_h + ridge·I)⁻¹: the paper's b_h uses both (in ``dtype``,
        None: the weight's)."""
        W_q = self.query.weight.unflatten(0, (self.heads, -1))  # (H, d_h, d): W_{Q,h}
        W_q = W_q if dtype is None else W_q.to(dtype)
        G = W_q @ W_q.transpose(-1, -2)
        return G, ridge_inverse(G, self.ridge)


class MHA2nd1stCorrected(MHA2nd1st):
    """MHA2nd1st built on the exact Newton step (ours): W_O[(q − k̄) + b], b_h = (1/T'_h) cov_h (q_h − k̄_h).

    cov_h = Σ_j p_{j,h} k_{j,h}k_{j,h}ᵀ − k̄_h k̄_hᵀ. The exact per-head Newton direction of the multi-head free
    energy is −WᵀG⁻¹C⁻¹(q − k̄) with W the stacked W_{Q,h} and G = WWᵀ (:func:`energylab.forms.newton.mha2nd_update`);
    its first Taylor term puts no G_h inside b_h, and the one d × d map −WᵀG⁻¹ is absorbed into the learned W_O.
    So: no G_h, no solve, no ridge. Same parameters as :class:`MHA2nd1st`. Args: dim, heads, causal.
    """

    def __init__(self, dim: int, heads: int, causal: bool = True):
        super().__init__(dim, heads, causal, ridge=0.0)

    def _metric(self, dtype: torch.dtype | None = None):
        return None, None


catalog.register_layer(MHA2nd1st, "mha2nd1st",
                       "the form with W_O learned in place of −W_{1,h}ᵀ, dot-product scores, learnable T_h, T'_h")
catalog.register_layer(MHA2nd1stCorrected, "mha2nd1st-corrected",
                       "the form with W_O learned in place of −WᵀG⁻¹, dot-product scores, learnable T_h, T'_h")
