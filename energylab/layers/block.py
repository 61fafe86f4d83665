"""The one pre-norm Transformer block every model of the book is built from.

    h  = x + c                          (c: the input injected by a looped model; None for a stacked model)
    h ← h + Dropout(A(Norm₁(h)))        A: an attention layer of energylab.layers, or a derived layer's update
    x' = h + Dropout(F(Norm₂(h)))       F: a feedforward (the GELU MLP or an energy feedforward); None: skipped

The looped Sudoku layers (``transformer``, ``form-*``, ``derived-*``) use RMSNorm, no dropout and the bias-free
:class:`MLP`; the LIS Transformer of paper 000 (:mod:`energylab.models.transformer`) LayerNorm, dropout 0.1 and a
biased feedforward. A and F return updates without the residual (the convention of :mod:`energylab.layers`).
Shapes: x, c (B, N, d) -> (B, N, d).
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from energylab.layers.free_energy import MultiHeadAttention
from energylab.layers.registry import register_layer

__all__ = ["PreNormBlock", "MLP", "TransformerBlock"]


class MLP(nn.Module):
    """The Transformer block's feedforward W_2 GELU(W_1 x), no biases: (..., d) -> (..., d)."""

    def __init__(self, dim: int, ffn_mult: int):
        super().__init__()
        self.ff1 = nn.Linear(dim, ffn_mult * dim, bias=False)
        self.ff2 = nn.Linear(ffn_mult * dim, dim, bias=False)

    def forward(self, x):
        return self.ff2(F.gelu(self.ff1(x)))


class PreNormBlock(nn.Module):
    """h = x (+ c); h = h + drop(attention(norm1(h))); x' = h + drop(feedforward(norm2(h))) (module docstring).

    Args: ``attention`` and ``feedforward`` (or None: an attention-only block) as built modules (they are built
    before the block, so their parameters are drawn in that order), ``dim`` d, ``norm`` the normalisation class
    (``nn.RMSNorm`` or ``nn.LayerNorm``), ``dropout`` on both sublayers' outputs.
    """

    def __init__(self, attention: nn.Module, feedforward: nn.Module | None, dim: int,
                 norm: Callable[[int], nn.Module] = nn.RMSNorm, dropout: float = 0.0):
        super().__init__()
        self.norm1, self.attention = norm(dim), attention
        self.norm2 = None if feedforward is None else norm(dim)
        self.feedforward = feedforward
        self.drop = nn.Dropout(dropout) if dropout else nn.Identity()

    def forward(self, x: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        h = x if c is None else x + c
        h = h + self.drop(self.attention(self.norm1(h)))
        if self.feedforward is None:
            return h
        return h + self.drop(self.feedforward(self.norm2(h)))


class TransformerBlock(PreNormBlock):
    """The looped Transformer's layer: the pre-norm block (:class:`PreNormBlock`) with
    softmax multi-head attention over all pairs (a board has no order) and the GELU MLP, no biases or dropout,
    the input injected first:

        h = x + c;  h = h + MSA(RMSNorm(h));  x' = h + FFN(RMSNorm(h)),   FFN = W_2 GELU(W_1 ·)

    (c = None: h = x). Shapes: x, c (B, N, d) -> (B, N, d); heads H with d_h = d / H. The same block as the
    ``form-mha`` layer, with the attention weights as a hook.
    """

    def __init__(self, dim: int, heads: int, ffn_mult: int = 4):
        super().__init__(MultiHeadAttention(dim, heads, causal=False), MLP(dim, ffn_mult), dim)

    def attention_weights(self, h: torch.Tensor) -> torch.Tensor:
        """The softmax weights softmax(q kᵀ/√d_h) that :meth:`forward` applies to the tokens h = x + c (before
        RMSNorm): (B, N, d) -> (B, H, N_query, N_key), rows summing to one."""
        return self.attention.weights(self.norm1(h))


register_layer("transformer", TransformerBlock)
