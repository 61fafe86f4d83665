"""What the standard layers share: input checks, the causal mask, and the W_Q, W_K, W_V, W_O projections."""
from __future__ import annotations

import torch
from torch import nn

from energylab._checks import (
    check_count,
    check_dim,
    check_divides,
    check_int,
    check_same_dtype,
    check_tensor,
)
from energylab.forms._common import split_heads


def check_input(x, dim: int, weight: torch.Tensor) -> None:
    """x must be (B, N ≥ 1, dim) in the dtype of the layer's ``weight`` (autocast aside); finiteness is checked
    eagerly only (check_tensor skips it under torch.compile)."""
    check_tensor("x", x, ndim=3)
    check_count("x", x, 1)
    check_dim("x", x.shape[-1], dim)
    check_same_dtype(("the layer's parameters", weight), ("x", x))


def check_sizes(dim, heads=None) -> tuple[int, int | None]:
    """dim a positive int and, if given, heads a positive int dividing it; returned as ints."""
    dim = check_int("dim", dim, minimum=1)
    return dim, None if heads is None else check_divides("heads", heads, dim)


def causal_mask(n: int, device) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()  # (N, N): True where j ≤ i


class QKVAttention(nn.Module):
    """Shared projections of the standard layers: W_Q, W_K, W_V, W_O (no bias, as in paper 000 eq. 11)."""

    def __init__(self, dim: int, heads: int, causal: bool):
        super().__init__()
        dim, heads = check_sizes(dim, heads)
        self.dim, self.heads, self.causal = dim, heads, bool(causal)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)  # [W_Q; W_K; W_V]
        self.out = nn.Linear(dim, dim, bias=False)  # W_O = [W_{O,1} ... W_{O,H}] (d, H·d_h): W_Oᵀ is (H, d_h, d)

    def _qkv(self, x):
        check_input(x, self.dim, self.qkv.weight)
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # each (B, N, d)
        return split_heads(q, self.heads), split_heads(k, self.heads), split_heads(v, self.heads)
