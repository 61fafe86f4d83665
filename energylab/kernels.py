"""Evaluation kernels behind the layers: cache-sized query blocks, the fused expressive-attention core, and the
per-head second-order direction of MHA2nd1st. Plain tensor functions without validation (their callers
validate); re-exported by :mod:`energylab.operators`.
"""
from __future__ import annotations

import torch

__all__ = ["row_blocks", "expressive_attention_values", "newton_first_order_direction", "ridge_inverse"]


def row_blocks(n_rows: int, n_cols: int, batch: int, budget: int = 2**22, min_rows: int = 32) -> list[slice]:
    """Slices of query rows such that one (batch, rows, n_cols) score block holds about ``budget`` elements.

    Layers loop over these blocks so that the element-wise work on each score block stays in cache (a CPU
    has no fused attention kernel for these forms); the result is the same as one full (N, N) pass.
    ``budget`` (elements, 16 MiB of float32) and ``min_rows`` were picked by timing on a 2-core Xeon.
    """
    rows = max(min_rows, budget // max(1, batch * n_cols))
    return [slice(i, min(i + rows, n_rows)) for i in range(0, n_rows, rows)]


def _mask_rows(mask, rows: slice):
    return None if mask is None or mask.dim() < 2 else mask[..., rows, :]


class _ExpressiveAttentionCore(torch.autograd.Function):
    """y = (Σ_k w_mk v_k) / Σ_k w_mk, w = s²/(1+s²), s = q kᵀ, with a hand-written backward.

    Fewer passes over the (M, N) scores than autograd would make: w = σ(log s²) in place, normalisation after
    the value product, and dw/ds = 2s(1 − w)². Saves s and w (2 score-sized tensors). A masked score is set
    to 0, whose weight is exactly 0 and whose gradient factor 2s(1 − w)² is 0 too.
    """

    @staticmethod
    def forward(ctx, q, k, v, mask):
        s = q @ k.transpose(-1, -2)  # (..., M, N)
        if mask is not None:
            s.masked_fill_(~mask, 0.0)
        w = (s * s).log_().sigmoid_()  # s²/(1+s²) = σ(log s²), exact at s = 0 (σ(−∞) = 0)
        norm = w.sum(-1, keepdim=True).clamp_min_(torch.finfo(w.dtype).tiny)  # N_m: (..., M, 1)
        y = (w @ v).div_(norm)
        ctx.save_for_backward(q, k, v, s, w, norm, y)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_y):
        q, k, v, s, w, norm, y = ctx.saved_tensors
        g = grad_y / norm  # (..., M, e)
        grad_v = w.transpose(-1, -2) @ g
        g = g * 2  # the 2 of dw/ds = 2s(1 − w)², applied on the small tensor
        grad_s = (g @ v.transpose(-1, -2)).sub_((g * y).sum(-1, keepdim=True))  # 2 ∂L/∂w_mk
        grad_s.mul_(s)  # in place, no score-sized temporaries:
        grad_s.addcmul_(grad_s, w, value=-1.0)  # · (1 − w)
        grad_s.addcmul_(grad_s, w, value=-1.0)  # · (1 − w) again
        return grad_s @ k, grad_s.transpose(-1, -2) @ q, grad_v, None


def expressive_attention_values(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None):
    """Σ_k a_mk v_k with EA's weights a = expressive_weights(q kᵀ, mask), computed without forming a.

    The same numbers as ``expressive_weights(q @ k.mT, mask) @ v`` (paper 001), normalised after the value
    product and with a fused backward (see ``_ExpressiveAttentionCore``). Used by the EA layer; no validation.
    q: (..., M, p), k: (..., N, p), v: (..., N, e), mask: boolean broadcastable to (..., M, N)  ->  (..., M, e).
    """
    blocks = row_blocks(q.shape[-2], k.shape[-2], q[..., 0, 0].numel())
    if len(blocks) == 1:
        return _ExpressiveAttentionCore.apply(q, k, v, mask)
    return torch.cat([_ExpressiveAttentionCore.apply(q[..., rows, :], k, v, _mask_rows(mask, rows))
                      for rows in blocks], dim=-2)


def newton_first_order_direction(q, k, weights, G=None, T2=1.0, ridge: float = 0.0, G_inv=None) -> torch.Tensor:
    """(q − k̄) + b with b = G⁻¹ (1/T') [Σ_j p_j k_j (k_jᵀ u) − k̄ (k̄ᵀ u)], u = G (q − k̄) (paper 000, eqs. 29-31).

    The per-head core of MHA2nd1st, shared by the catalog operator and :class:`energylab.modules.MHA2nd1st`.
    q: (..., M, p) queries, k: (..., N, p) keys, weights: (..., M, N) rows on the simplex, G: (..., p, p)
    symmetric positive definite (None = I), T2 > 0 broadcastable to (..., M, 1). The solve uses G + ridge·I;
    the paper does not say whether G is stabilised, a small ridge is our choice (0 gives the exact formula).
    ``G_inv`` may pass a precomputed (G + ridge·I)⁻¹ (see :func:`ridge_inverse`). Returns (..., M, p).
    """
    k_bar = weights @ k  # k̄ = Σ_j p_j k_j: (..., M, p)
    g = q - k_bar
    u = g if G is None else g @ G  # G symmetric: u_m = G g_m
    c = u @ k.transpose(-1, -2)  # (..., M, N): k_jᵀ u_m
    s = (weights * c) @ k - k_bar * (k_bar * u).sum(-1, keepdim=True)  # Σ_j p_j d_j d_jᵀ u (covariance form)
    s = s / T2
    if G is not None and G_inv is None:
        G_inv = ridge_inverse(G, ridge)
    if G_inv is not None:
        s = s @ G_inv.to(s.dtype)  # G⁻¹ symmetric: b_m = G⁻¹ s_m
    return g + s


def ridge_inverse(G: torch.Tensor, ridge: float = 0.0) -> torch.Tensor:
    """(G + ridge·I)⁻¹ of small (..., p, p) matrices, inverted in float32 or better (bf16 has no inverse)."""
    eye = torch.eye(G.shape[-1], dtype=G.dtype, device=G.device)
    work = G + ridge * eye
    return torch.linalg.inv(work if work.dtype in (torch.float32, torch.float64) else work.float()).to(G.dtype)
