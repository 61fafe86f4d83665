"""What several families of :mod:`energylab.forms` share: input checks, head bookkeeping, cache-sized row blocks
and the random draws of the samplers.

Shapes (book/notation.md): a query z (..., d), tokens H (N, d) as rows, W (d, d); multi-head weights
(heads, d_h, d) with d_h = d / heads, multi-head tensors (..., heads, N, d_h) (H is the token matrix, so a head
count is written ``heads``).
"""
from __future__ import annotations

import math

import torch

from energylab._checks import check_count, check_dim, check_int, check_positive, check_same_dtype, check_tensor
from energylab.sphere import random_tokens

__all__ = ["NO_KEYS", "check_query_tokens", "mapped_tokens", "check_scores_mask", "row_blocks", "mask_rows",
           "split_heads", "merge_heads", "heads_for", "randn", "unit_rows", "well_conditioned", "temperature"]

NO_KEYS = "a softmax over zero keys is undefined"


# ----------------------------------------------------------------------------- checks
def check_query_tokens(z, H, W) -> None:
    """Validate a query z (..., d), tokens H (N ≥ 1, d) and a square map W (d, d); errors name the argument."""
    check_tensor("z", z)
    if z.dim() < 1:
        raise ValueError(f"z must have at least 1 dim (..., d), got shape {tuple(z.shape)}")
    check_tensor("H", H, ndim=2)
    check_count("H", H, 0, why=NO_KEYS)
    check_tensor("W", W, ndim=2)
    d = z.shape[-1]
    check_dim("H", H.shape[-1], d)
    if W.shape != (d, d):
        raise ValueError(f"W must have shape ({d}, {d}) to match z, got {tuple(W.shape)}")
    check_same_dtype(("z", z), ("H", H), ("W", W))


def mapped_tokens(H: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """The rows W h_i: H (N, d), W (d, d) -> (N, d). No validation (callers ran :func:`check_query_tokens`)."""
    # (W h_i)_a = sum_b W_ab H_ib
    return torch.einsum("ab,ib->ia", W, H)


def check_hopfield(xi, X, beta):
    """A Hopfield state xi (..., d), patterns X (N ≥ 1, d) as rows in xi's dtype, and beta > 0; returns beta. The
    dense (:mod:`~energylab.forms.hopfield`) and sparse (:mod:`~energylab.forms.sparse_hopfield`) families' check."""
    check_tensor("xi", xi)
    check_tensor("X", X, ndim=2)
    check_count("X", X, 0, what="pattern", why=NO_KEYS)
    check_dim("X", X.shape[-1], xi.shape[-1])
    check_same_dtype(("xi", xi), ("X", X))
    return check_positive("beta", beta)


def check_scores_mask(scores, mask) -> None:
    """Validate scores (..., M, N ≥ 1) and an optional boolean mask broadcastable to them."""
    check_tensor("scores", scores)
    check_count("scores", scores, -1, what="key on its last dim", why=NO_KEYS)
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise TypeError("mask must be a boolean tensor (True where attention is allowed)")
        try:
            torch.broadcast_shapes(mask.shape, scores.shape)
        except RuntimeError:
            raise ValueError(
                f"mask shape {tuple(mask.shape)} does not broadcast to scores shape {tuple(scores.shape)}"
            ) from None


# ----------------------------------------------------------------------------- layers' bookkeeping
def row_blocks(n_rows: int, n_cols: int, batch: int, budget: int = 2**22, min_rows: int = 32) -> list[slice]:
    """Slices of query rows such that one (batch, rows, n_cols) score block holds about ``budget`` elements.

    Layers loop over these blocks so that the element-wise work on each score block stays in cache (a CPU
    has no fused attention kernel for these forms); the result is the same as one full (N, N) pass.
    ``budget`` (elements, 16 MiB of float32) and ``min_rows`` were picked by timing on a 2-core Xeon.
    """
    rows = max(min_rows, budget // max(1, batch * n_cols))
    return [slice(i, min(i + rows, n_rows)) for i in range(0, n_rows, rows)]


def mask_rows(mask: torch.Tensor | None, rows: slice) -> torch.Tensor | None:
    """The rows of a (..., M, N) mask that a query block uses (a mask without a query axis is shared)."""
    return None if mask is None or mask.dim() < 2 else mask[..., rows, :]


def split_heads(t: torch.Tensor, heads: int) -> torch.Tensor:
    """(..., N, H·d_h) -> (..., H, N, d_h): the columns of head h are h·d_h, ..., (h+1)·d_h − 1."""
    return t.unflatten(-1, (heads, -1)).transpose(-2, -3)


def merge_heads(t: torch.Tensor) -> torch.Tensor:
    """(..., H, N, d_h) -> (..., N, H·d_h), the inverse of :func:`split_heads`."""
    return t.transpose(-2, -3).flatten(-2)


# ----------------------------------------------------------------------------- samplers' draws
def heads_for(dim: int) -> int:
    """The smallest prime factor of dim below dim (so d_h = dim/heads > 1), or 1 when dim is prime.

    Multi-head samplers use this many heads: verify a multi-head form at a composite dim (e.g. 6) to test heads.
    """
    dim = check_int("dim", dim, minimum=1)
    return next((q for q in range(2, dim) if dim % q == 0), 1)


def randn(generator, dtype, *shape) -> torch.Tensor:
    """Standard normal entries of the given shape."""
    return torch.randn(*shape, generator=generator, dtype=dtype)


def unit_rows(generator, dtype, rows: int, dim: int) -> torch.Tensor:
    """(rows, dim) points uniform on the unit sphere (:func:`energylab.sphere.random_tokens` with one batch)."""
    return random_tokens(1, rows, dim, dtype=dtype, generator=generator)[0]


def well_conditioned(generator, dtype, rows: int, cols: int | None = None, spread: float = 0.3):
    """I + spread·G/√cols (rows, cols): invertible with high probability when square, condition ~ 2."""
    cols = rows if cols is None else cols
    return torch.eye(rows, cols, dtype=dtype) + spread * randn(generator, dtype, rows, cols) / math.sqrt(cols)


def temperature(generator, dtype) -> float:
    """T uniform in [0.5, 1.5)."""
    return float(0.5 + torch.rand((), generator=generator, dtype=dtype))
