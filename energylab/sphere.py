"""Observables of a token cloud on the sphere: alignment, clusters, time to collapse.

Tokens are (..., N, d) with unit rows (any leading batch/time axes). The flows that move them, and the energy
E_beta, live in ``energylab.dynamics``. Clusters follow Geshkovski et al. (2023): under SA/USA the tokens merge
into a few points; we count them as the connected components of the graph that links tokens closer than a
threshold (single linkage), so a cluster that is still contracting but already separated counts as one.
"""
from __future__ import annotations

import math

import torch

from energylab._checks import check_positive, check_tensor
from energylab.dynamics import Trajectory


def _check_cloud(name: str, x) -> torch.Tensor:
    check_tensor(name, x)
    if x.dim() < 2:
        raise ValueError(f"{name} must have shape (..., N, d), got {tuple(x.shape)}")
    return x


def mean_cosine(x: torch.Tensor) -> torch.Tensor:
    """Mean pairwise cosine over i != j: (||sum_i x_i||^2 - n) / (n (n - 1)); (..., N, d) -> (...).

    Equals 1 exactly when all tokens coincide; about 0 for a uniform cloud. The average angle of paper 004
    (Hu et al. 2025) is arccos of this number.
    """
    _check_cloud("x", x)
    n = x.shape[-2]
    if n < 2:
        raise ValueError(f"x must hold at least two tokens, got shape {tuple(x.shape)}")
    s = x.sum(-2)  # (..., d)
    return ((s * s).sum(-1) - (x * x).sum((-1, -2))) / (n * (n - 1))


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


def time_to_collapse(trajectory: Trajectory, threshold: float = 0.1) -> torch.Tensor:
    """First saved time at which all tokens form one cluster, per batch element: (B,); inf if never."""
    if not isinstance(trajectory, Trajectory):
        raise TypeError(f"trajectory must be a Trajectory, got {type(trajectory).__name__}")
    one = count_clusters(trajectory.x, threshold) == 1  # (T, B)
    t = trajectory.t.unsqueeze(1).expand_as(one)  # (T, B)
    return torch.where(one, t, torch.full_like(t, math.inf)).min(0).values


__all__ = ["mean_cosine", "cluster_labels", "count_clusters", "time_to_collapse"]
