"""A compact pre-LN decoder-only Transformer with pluggable attention (Vaswani et al. 2017; paper 000, Sec. 5).

    x⁰ = Embed(tokens) + PE                                      sinusoidal absolute positions, then dropout
    (each layer is the one pre-norm block, :class:`energylab.layers.block.PreNormBlock`, with LayerNorm)
    x^{l+½} = x^l + Dropout(Attn(LN(x^l)))                        Attn: any layer of energylab.layers
    x^{l+1} = x^{l+½} + Dropout(FFN(LN(x^{l+½})))                 skipped in the "-only" variants
    logits = LN(x^L) Eᵀ                                          E tied to the embedding or a separate matrix

``attention`` is a callable ``(dim, heads) -> nn.Module`` mapping (B, N, d) -> (B, N, d) without the residual, e.g.
:class:`energylab.layers.MultiHeadAttention` or :class:`energylab.layers.MHA2nd1st` (both causal by default).
Every submodule keeps PyTorch's default initialisation (the attention layers' own, e.g. MHA2nd1st's temperatures
T_h = T'_h = d_h). Shapes: B batch, N tokens, d = dim, V vocabulary.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from energylab.layers import MultiHeadAttention, PreNormBlock
from energylab.models import count_parameters

AttentionFactory = Callable[[int, int], nn.Module]


@dataclass
class TransformerConfig:
    vocab_size: int  # V: token ids are 0 … V−1
    dim: int = 64  # d, the residual-stream width
    layers: int = 3  # paper 000 uses 3 layers for LIS
    heads: int = 4  # H; paper 000 does not state it, 4 is our choice (d_h = 8 at d = 32)
    max_len: int = 256  # longest sequence the positional table covers
    ffn: bool = True  # False gives the paper's "-only" (attention-only) variants
    ffn_mult: int = 4  # FFN hidden width = ffn_mult · d, as in Vaswani et al.
    dropout: float = 0.1  # paper 000: 0.1 everywhere
    tied: bool = False  # True reads out with the embedding matrix (nanoGPT); the paper does not say

    def __post_init__(self):
        for name in ("vocab_size", "dim", "layers", "heads", "max_len", "ffn_mult"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.dim % self.heads:
            raise ValueError(f"heads={self.heads} must divide dim={self.dim}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")


def sinusoidal_positions(n: int, dim: int) -> torch.Tensor:
    """PE[t, 2i] = sin(t / 10000^{2i/d}), PE[t, 2i+1] = cos(…) (Vaswani et al. 2017). -> (n, dim)."""
    t = torch.arange(n, dtype=torch.float64).unsqueeze(1)  # (n, 1)
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (⌈d/2⌉,)
    pe = torch.zeros(n, dim, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(t * freq)
    pe[:, 1::2] = torch.cos(t * freq[: dim // 2])
    return pe.float()


class FeedForward(nn.Module):
    """FFN(x) = W₂ GELU(W₁ x + b₁) + b₂ with hidden width ffn_mult · d."""

    def __init__(self, dim: int, mult: int):
        super().__init__()
        self.up = nn.Linear(dim, mult * dim)
        self.down = nn.Linear(mult * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(nn.functional.gelu(self.up(x)))  # (B, N, d)


class Transformer(nn.Module):
    """Decoder-only language model: tokens (B, N) -> logits (B, N, V)."""

    def __init__(self, config: TransformerConfig, attention: AttentionFactory = MultiHeadAttention):
        super().__init__()
        if not callable(attention):
            raise TypeError(f"attention must be a callable (dim, heads) -> nn.Module, got {type(attention).__name__}")
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.dim)
        self.register_buffer("positions", sinusoidal_positions(config.max_len, config.dim), persistent=False)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(  # the one pre-norm block, with LayerNorm and dropout here
            PreNormBlock(attention(config.dim, config.heads),
                         FeedForward(config.dim, config.ffn_mult) if config.ffn else None, config.dim,
                         norm=nn.LayerNorm, dropout=config.dropout)
            for _ in range(config.layers))
        self.ln_out = nn.LayerNorm(config.dim)
        self.readout = None if config.tied else nn.Linear(config.dim, config.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() != 2 or tokens.is_floating_point():
            raise ValueError(f"tokens must be an integer tensor (B, N), got dtype {tokens.dtype}, "
                             f"shape {tuple(tokens.shape)}")
        n = tokens.shape[1]
        if n > self.config.max_len:
            raise ValueError(f"sequence length {n} exceeds max_len={self.config.max_len}")
        x = self.drop(self.embed(tokens) + self.positions[:n])  # (B, N, d)
        for block in self.blocks:
            x = block(x)
        x = self.ln_out(x)
        if self.readout is None:
            return x @ self.embed.weight.T  # (B, N, V), tied readout
        return self.readout(x)  # (B, N, V)


def attention_parameters(model: Transformer) -> list[int]:
    """Trainable parameters of each layer's attention: 4d² for MHA, 3d² + 2H for MHA2nd1st."""
    return [count_parameters(block.attention) for block in model.blocks]
