"""Softmax multi-head attention, one gradient step on the multi-head free energy (Theorem 2;
:mod:`energylab.forms.free_energy`).

Every layer maps x (B, N, d) -> (B, N, d) and returns its update without the residual (see
:mod:`energylab.layers`)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from energylab import catalog, kernels
from energylab.forms._common import merge_heads
from energylab.layers._common import QKVAttention, causal_mask

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(QKVAttention):
    """Standard MHA, Σ_h W_{O,h} Σ_j softmax_j(q_hᵀk_{j,h}/√d_h) v_{j,h} (paper 000 eq. 11 minus the residual).

    One gradient step on the multi-head free energy (Theorem 2). Uses F.scaled_dot_product_attention.
    Args: dim d, heads H (must divide d), causal (mask j > i). Parameters: 4d².
    """

    def __init__(self, dim: int, heads: int, causal: bool = True):
        super().__init__(dim, heads, causal)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._qkv(x)  # (B, H, N, d_h)
        with kernels.softmax_attention_backend(q):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.out(merge_heads(y))

    def weights(self, x: torch.Tensor) -> torch.Tensor:
        """The attention weights softmax_j(q_hᵀk_{j,h}/√d_h) that :meth:`forward` applies, masked when causal:
        (B, N, d) -> (B, H, N_query, N_key), rows summing to one."""
        q, k, _ = self._qkv(x)
        s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
        if self.causal:
            s = s.masked_fill(~causal_mask(x.shape[1], x.device), float("-inf"))
        return torch.softmax(s, dim=-1)


catalog.register_layer(MultiHeadAttention, "multihead_free_energy",
                       "one step of the form on the spheres (Theorem 2), dot-product scores, W_V and W_O learned "
                       "freely")
