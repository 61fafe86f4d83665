"""One fused kernel per Euler step of the sphere flows SA and USA: ``FlowConfig(fused=True)`` of :mod:`energylab.flows`.

(Where every head's Q_hᵀK_h is symmetric and there is no causal mask, ``fused=True`` takes the faster kernel of
:mod:`energylab.kernels.sphere_symmetric` instead, which computes each exponential once for two pairs; this step
covers the rest: any weights, causal masks, any device.)

The default integrator of :mod:`energylab.flows` calls PyTorch's attention kernel and then four small kernels per
step (tangent projection, step, norm, division), and the attention kernel itself writes the (N, N) score matrix and
reads it back. With d = 3 every score costs 3 multiply-adds and the work is really the N² exponentials, so the
memory traffic and the Python calls dominate. Here the whole Euler step

    x_i ← N(x_i + h P_{x_i} v_i),   v_i = Σ_h Σ_j w_{h,ij} V_h x_j,
    w_{h,ij} = exp(β⟨Q_h x_i, K_h x_j⟩ − c_{h,i}) / Z_{h,i}

is one function of the tokens, written coordinate by coordinate (tokens stored as (B, d, N), each coordinate a
contiguous row), which ``torch.compile`` turns into one loop over the pairs (i, j) that never stores a score: per
pair the d_h products, one exponential and d + 1 running sums. One Python call per step.

The softmax shift. A softmax does not change when each row's exponents are shifted by a constant; PyTorch uses the
row maximum, which needs a second pass over the scores. We use the Cauchy–Schwarz bound
c_{h,i} = β‖Q_h x_i‖ max_j ‖K_h x_j‖ ≥ max_j β⟨Q_h x_i, K_h x_j⟩, so no exponential overflows; it equals the
maximum when Q_h = K_h and the tokens are unit (the identity preset: the self-score). In general the bound exceeds
the maximum by at most 2β‖Q_h‖₂‖K_h‖₂ for unit tokens, and the largest term of each row is at least exp of minus
that: :func:`shift_is_safe` accepts the weights when this stays well inside the dtype's range (β‖Q_h‖₂‖K_h‖₂ ≤ 40
in float32), and the flows fall back to the unfused step otherwise. USA needs no shift (its overflow is checked by
the caller).

Shapes: tokens xt (B, d, N) (coordinates first), Q and K (H, d_h, d), V (H, d, d); beta and step are 0-d tensors
(so that changing them does not recompile).
"""
from __future__ import annotations

import functools
import math

import torch

SHIFT_MARGIN = 0.45  # fraction of -log(smallest normal) that the worst shift gap may use: rows keep a normal term


def shift_is_safe(Q: torch.Tensor, K: torch.Tensor, beta: float, dtype: torch.dtype) -> bool:
    """Whether the Cauchy–Schwarz shift keeps a normal (non-underflowing) term in every softmax row, for unit tokens.

    The gap between the shift and a row's maximum is at most 2 β max_h ‖Q_h‖₂‖K_h‖₂; it must stay below
    ``2 * SHIFT_MARGIN * (-log tiny)``, i.e. β‖Q_h‖₂‖K_h‖₂ ≤ 39.3 in float32 and ≤ 318 in float64.
    """
    norms = torch.linalg.matrix_norm(Q.double(), ord=2) * torch.linalg.matrix_norm(K.double(), ord=2)  # (H,)
    return float(beta * norms.max()) <= SHIFT_MARGIN * -math.log(torch.finfo(dtype).tiny)


def euler_step(xt: torch.Tensor, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, beta: torch.Tensor,
               step: torch.Tensor, normalized: bool, causal: bool) -> torch.Tensor:
    """One Euler step x ← N(x + h P_x v(x)) of SA (``normalized``) or USA, tokens as coordinates: (B, d, N) -> same.

    Plain PyTorch, so it runs (slowly: it stores several (B, N, N) tensors) without compilation too; its speed comes
    from :func:`compiled_euler_step`.
    """
    heads, d_h, d = Q.shape
    n = xt.shape[-1]
    # all projections in one product, stored (so that the pair loop reads them instead of recomputing them):
    # rows [Q_1; ...; Q_H; K_1; ...; K_H; V_1; ...; V_H] times the tokens -> (B, H (2 d_h + d), N)
    proj = torch.cat([Q.flatten(0, 1), K.flatten(0, 1), V.flatten(0, 1)]) @ xt
    rows = lambda start, h, width: [proj[..., start + h * width + c, :] for c in range(width)]  # noqa: E731
    coords = [xt[..., e, :] for e in range(d)]
    if causal:
        idx = torch.arange(n, device=xt.device)
        keep = idx.unsqueeze(-1) >= idx  # (N, N): j <= i
    y = [torch.zeros_like(coords[0]) for _ in range(d)]  # velocity before projection, per coordinate (B, N)
    for h in range(heads):
        q, k, v = rows(0, h, d_h), rows(heads * d_h, h, d_h), rows(2 * heads * d_h, h, d)
        score = sum(q[c].unsqueeze(-1) * k[c].unsqueeze(-2) for c in range(d_h))  # (B, N, N), never stored
        if normalized:
            q_norm = torch.sqrt(sum(t * t for t in q))  # (B, N)
            k_max = torch.sqrt(sum(t * t for t in k)).amax(-1, keepdim=True)  # (B, 1)
            a = torch.exp(beta * (score - (q_norm * k_max).unsqueeze(-1)))
        else:
            a = torch.exp(beta * score)
        if causal:
            a = torch.where(keep, a, torch.zeros((), dtype=a.dtype, device=a.device))
        z = a.sum(-1) if normalized else torch.full_like(coords[0], float(n))  # (B, N)
        for c in range(d):
            y[c] = y[c] + (a * v[c].unsqueeze(-2)).sum(-1) / z
    radial = sum(y[c] * coords[c] for c in range(d))  # ⟨x_i, y_i⟩: the tangent projection removes it
    moved = [coords[c] + step * (y[c] - radial * coords[c]) for c in range(d)]
    norm = torch.sqrt(sum(t * t for t in moved))
    return torch.stack([t / norm for t in moved], dim=-2)


@functools.cache
def compiled_euler_step():
    """:func:`euler_step` under ``torch.compile`` (built once per process; each new shape compiles on first use)."""
    return torch.compile(euler_step)


__all__ = ["SHIFT_MARGIN", "shift_is_safe", "euler_step", "compiled_euler_step"]
