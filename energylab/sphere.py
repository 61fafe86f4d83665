"""Geometry of the sphere and observables of a token cloud on it.

Geometry (used by the flows of :mod:`energylab.flows`, the on-sphere forms of :mod:`energylab.forms` and the
attractor model): the tangent projection P_x v, the normalisation x/‖x‖, the projected step, random tokens.
Observables (Geshkovski et al. 2023): alignment, clusters, time to collapse. Under SA/USA the tokens merge into a
few points; we count them as the connected components of the graph that links tokens closer than a threshold
(single linkage), so a cluster that is still contracting but already separated counts as one.

Shapes: tokens are rows, (..., N, d) (any leading batch/time axes); a saved trajectory is (S, B, N, d) with its
times (S,).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from energylab._checks import check_int, check_nonzero_rows, check_positive, check_tensor

__all__ = ["tangent_projection", "unit_tangent_projection", "normalize", "sphere_step", "random_tokens",
           "mean_cosine", "average_angle", "mean_pairwise_angle", "effective_rank", "cluster_labels", "count_clusters",
           "time_to_collapse"]


# ----------------------------------------------------------------------------- geometry
def _check_on_sphere(x, v, v_name: str) -> None:
    check_tensor("x", x)
    if x.dim() < 1:
        raise ValueError(f"x must have at least 1 dim (..., d), got shape {tuple(x.shape)}")
    check_tensor(v_name, v)
    if x.shape != v.shape:
        raise ValueError(f"{v_name} must have the shape of x {tuple(x.shape)}, got {tuple(v.shape)}")


def unit_tangent_projection(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """P_x v = v − ⟨x, v⟩ x row-wise for rows x that are already UNIT: x, v (..., d) -> (..., d).

    A kernel, not a checked function: it neither validates nor divides by ‖x‖, for loops whose tokens are unit
    by construction (the flows of :mod:`energylab.flows`, after one check of x0). For any non-zero x use
    :func:`tangent_projection`, which normalises x first and then applies this formula.
    """
    return v - (x * v).sum(-1, keepdim=True) * x


def tangent_projection(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """P_x v = v − ⟨x̂, v⟩ x̂ row-wise, x̂ = x/‖x‖: the part of v tangent to the sphere through x (Geshkovski et al.).

    x, v: (..., d) of the same shape  ->  (..., d). A zero row of x has no tangent space: ValueError naming x.
    """
    _check_on_sphere(x, v, "v")
    return _tangent_projection(x, v)


def _tangent_projection(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    norm = x.norm(dim=-1, keepdim=True)
    check_nonzero_rows("x", x, norm, why="a zero vector has no direction, hence no tangent space on the sphere")
    return unit_tangent_projection(x / norm, v)


def normalize(x: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """Each row back onto the unit sphere, x_i / max(‖x_i‖, eps): (..., d) -> (..., d).

    With eps > 0 a zero row stays zero (the attractor network's masked tokens); with eps = 0 it would be 0/0.
    No validation: the flows and the attractor model call it once per step on tokens they checked.
    """
    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return x / (norm.clamp(min=eps) if eps > 0 else norm)


def sphere_step(x: torch.Tensor, update: torch.Tensor, eta: float) -> torch.Tensor:
    """Projected step on the sphere: x ← ‖x‖ · (x + η P_x u) / ‖x + η P_x u‖ (row-wise; keeps each ‖x_i‖).

    x, update: (..., d), x without zero rows (ValueError naming x); eta > 0.
    """
    _check_on_sphere(x, update, "update")
    eta = check_positive("eta", eta)
    y = x + eta * _tangent_projection(x, update)
    return y * (x.norm(dim=-1, keepdim=True) / y.norm(dim=-1, keepdim=True))


def random_tokens(batch: int, n: int, d: int, seed: int = 0, hemisphere: bool = False, dtype=torch.float64,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """(B, N, d) tokens uniform on S^{d-1} (or on the open hemisphere x_1 > 0).

    Drawn from their own generator seeded with ``seed``, or from ``generator`` when one is given (``seed`` is
    then unused): the catalog's samplers thread one generator through every draw of an instance.
    """
    batch, n, d = (check_int(name, v, minimum=1) for name, v in (("batch", batch), ("n", n), ("d", d)))
    gen = torch.Generator().manual_seed(seed) if generator is None else generator
    x = F.normalize(torch.randn(batch, n, d, generator=gen, dtype=dtype), dim=-1)
    if hemisphere:
        x[..., 0] = x[..., 0].abs()
    return x


# ----------------------------------------------------------------------------- observables
def _check_cloud(name: str, x) -> torch.Tensor:
    check_tensor(name, x)
    if x.dim() < 2:
        raise ValueError(f"{name} must have shape (..., N, d), got {tuple(x.shape)}")
    return x


def mean_cosine(x: torch.Tensor) -> torch.Tensor:
    """Mean pairwise inner product over i != j, (||sum_i x_i||^2 - sum_i ||x_i||^2) / (n (n - 1)): (..., N, d) -> (...).

    For UNIT rows (as the flows keep them) this is the mean pairwise cosine, (||sum_i x_i||^2 - n) / (n (n - 1)):
    1 exactly when all tokens coincide, about 0 for a uniform cloud. For rows of other norms it is not a cosine;
    the average angles of paper 004 normalise first: :func:`average_angle` (the paper's definition, arccos of the
    mean cosine) and :func:`mean_pairwise_angle` (the authors' code, the mean of the pairwise arccos).
    """
    _check_cloud("x", x)
    n = x.shape[-2]
    if n < 2:
        raise ValueError(f"x must hold at least two tokens, got shape {tuple(x.shape)}")
    s = x.sum(-2)  # (..., d)
    return ((s * s).sum(-1) - (x * x).sum((-1, -2))) / (n * (n - 1))


def average_angle(x: torch.Tensor) -> torch.Tensor:
    """The paper's average angle (paper 004, Def. D.2) in degrees: arccos of the mean pairwise cosine of the rows
    (normalised here, so any non-zero rows): (..., N ≥ 2, d) -> (...). Rows of a zero norm: ValueError naming x."""
    return torch.rad2deg(torch.arccos(mean_cosine(_unit_rows(x)).clamp(-1, 1)))


def mean_pairwise_angle(x: torch.Tensor) -> torch.Tensor:
    """The authors' code's average angle in degrees: the mean over pairs i != j of arccos(cos(x_i, x_j)).
    (..., N ≥ 2, d) -> (...). Never larger than :func:`average_angle` when every pairwise cosine is ≥ 0
    (arccos is concave on [0, 1]: Jensen), and the two agree when all pairwise angles are equal."""
    u = _unit_rows(x)
    n = u.shape[-2]
    cos = (u @ u.transpose(-1, -2)).clamp(-1, 1)  # (..., N, N)
    off = ~torch.eye(n, dtype=torch.bool, device=x.device)
    return torch.rad2deg(torch.arccos(cos[..., off])).mean(-1)


def effective_rank(x: torch.Tensor) -> torch.Tensor:
    """exp(−Σ_k p_k log p_k), p_k = σ_k / Σ σ (singular values of the N × d matrix of rows), as in paper 004
    (Def. D.1, Roy and Vetterli 2007): (..., N, d) -> (...); 1 for rank one, r for r equal singular values."""
    _check_cloud("x", x)
    s = torch.linalg.svdvals(x)
    p = s / s.sum(-1, keepdim=True)
    return torch.exp(-torch.special.xlogy(p, p).sum(-1))


def _unit_rows(x: torch.Tensor) -> torch.Tensor:
    _check_cloud("x", x)
    if x.shape[-2] < 2:
        raise ValueError(f"x must hold at least two tokens, got shape {tuple(x.shape)}")
    norm = x.norm(dim=-1, keepdim=True)
    check_nonzero_rows("x", x, norm, why="a zero vector has no direction, hence no angle")
    return x / norm


def cluster_labels(x: torch.Tensor, threshold: float = 0.1) -> torch.Tensor:
    """Label each token by the smallest index in its cluster: (..., N, d) -> (..., N) long.

    Tokens i, j are linked when ||x_i - x_j|| < threshold; clusters are the connected components, found by
    propagating the minimum label along links until nothing changes (at most N rounds).
    """
    _check_cloud("x", x)
    check_positive("threshold", threshold)
    n = x.shape[-2]
    linked = torch.cdist(x, x) < threshold  # (..., N, N)
    labels = torch.arange(n, device=x.device).expand(x.shape[:-1]).clone()  # (..., N)
    big = torch.full_like(labels, n)
    for _ in range(n):
        # new_i = min over j linked to i of labels_j (i is linked to itself)
        cand = torch.where(linked, labels.unsqueeze(-2), big.unsqueeze(-2))  # (..., N, N)
        new = cand.min(-1).values
        if torch.equal(new, labels):
            break
        labels = new
    return labels


def count_clusters(x: torch.Tensor, threshold: float = 0.1) -> torch.Tensor:
    """Number of clusters (connected components at distance < threshold): (..., N, d) -> (...) long."""
    labels = cluster_labels(x, threshold)
    n = labels.shape[-1]
    own = labels == torch.arange(n, device=labels.device)  # a token that is its cluster's smallest index
    return own.sum(-1)


def time_to_collapse(x: torch.Tensor, times: torch.Tensor, threshold: float = 0.1) -> torch.Tensor:
    """First saved time at which all tokens form one cluster, per batch element: (B,); inf if never.

    x: saved states (S, B, N, d), times: their times (S,), e.g. ``traj.x, traj.times`` of :func:`flows.simulate`.
    """
    _check_cloud("x", x)
    check_tensor("times", times, ndim=1)
    if x.dim() != 4 or times.shape[0] != x.shape[0]:
        raise ValueError(f"x must be (S, B, N, d) with S = len(times) = {times.shape[0]}, got {tuple(x.shape)}")
    one = count_clusters(x, threshold) == 1  # (S, B)
    t = times.unsqueeze(1).expand_as(one)  # (S, B)
    return torch.where(one, t, torch.full_like(t, math.inf)).min(0).values
