"""Expressive attention (paper 001): the Boltzmann weights of the expressive energy applied to the values
(:mod:`energylab.forms.expressive`).

Every layer maps x (B, N, d) -> (B, N, d) and returns its update without the residual (see
:mod:`energylab.layers`)."""
from __future__ import annotations

import math

import torch

from energylab import catalog, kernels
from energylab._checks import (
    check_positive,
)
from energylab.forms._common import merge_heads
from energylab.forms.expressive import expressive_weights
from energylab.kernels import attention as fa
from energylab.layers._common import QKVAttention, causal_mask

__all__ = ["ExpressiveAttention"]


class ExpressiveAttention(QKVAttention):
    """Expressive attention: weights s²/(1+s²) normalised per row, s = scale · q_hᵀk_{j,h} (Gros, paper 001).

    Args: dim, heads, causal; scale multiplies the raw scores (None: 1/√d_h as in MHA; the paper uses 1).
    Parameters: 4d², like MHA.
    """

    def __init__(self, dim: int, heads: int, causal: bool = True, scale: float | None = None):
        super().__init__(dim, heads, causal)
        self.scale = 1 / math.sqrt(dim // heads) if scale is None else check_positive("scale", scale, scalar=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._qkv(x)  # (B, H, N, d_h)
        if kernels.enabled():  # flex attention on CUDA, the tiled kernel on the CPU: no (N, N) tensor kept
            y = fa.expressive_heads(q, k, v, self.causal, self.scale)
            if y is not None:
                return self.out(merge_heads(y))
        mask = causal_mask(x.shape[1], x.device) if self.causal else None
        return self.out(merge_heads(expressive_weights((q * self.scale) @ k.transpose(-1, -2), mask) @ v))


catalog.register_layer(ExpressiveAttention, "expressive_attention",
                       "the same Boltzmann weights p_i; the layer is Σ_i p_i W_V h_i, not the gradient")
