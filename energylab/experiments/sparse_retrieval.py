"""Exact retrieval by sparse Hopfield updates against β and the load P, with the margin condition (chapter 12).

Patterns: P points uniform on the unit sphere in R^d (M = 1). Query: a stored x_i plus noise r·u, u a uniform unit
vector. After ONE update ξ ← Xᵀ ŷ_Ω(β X ξ) (:func:`energylab.forms.sparse_hopfield.fy_hopfield_update`):

- **exact**: the weights ŷ_Ω are exactly e_i, so the new state Xᵀŷ is x_i (``bitwise`` counts those whose state
  equals x_i bit for bit: all of them); softmax weights are never exactly one-hot (unless an exponential underflows);
- **within tolerance** (softmax, which is never one-hot): ‖ξ_new − x_i‖ ≤ ``tolerance`` (1e-6 by default).

On every instance two conditions are evaluated in float64 (m the margin of Ω, 1 for sparsemax, 2 for 1.5-entmax):

- the **query condition** β(x_iᵀξ − max_{j≠i} x_jᵀξ) ≥ m, which is equivalent to exact one-step retrieval;
- the **ball condition** Δ_i ≥ m/β + 2Mr on the patterns alone (Δ_i the separation of x_i), which implies the query
  condition for every query within distance r of x_i.

:func:`retrieval_grid` returns, per (map, P, β), the rates and the counts of violations: instances where a condition
holds and retrieval is not exact (must be 0), and, for the query condition, exact retrievals where it fails (must be 0
too: it is an equivalence). :func:`capacity_rows` measures the one-step capacity of chapter 3's protocol
(:mod:`energylab.experiments.hopfield_capacity`) for any map.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from energylab.experiments import hopfield_capacity as hc
from energylab.forms import sparse_hopfield as sh
from energylab.forms._common import unit_rows

__all__ = ["RetrievalConfig", "MAPS", "draw", "retrieval_grid", "rate", "capacity_rows", "metastable_sets", "set_share"]

MAPS = ("sparsemax", "entmax15", "softmax")  # the maps the chapter compares (regulariser kinds of sparse_hopfield)


@dataclass(frozen=True)
class RetrievalConfig:
    """One exact-retrieval measurement. Defaults: chapter 12's (a few seconds on one CPU thread)."""

    dim: int = 16  # d: patterns on the unit sphere of R^d
    loads: tuple[int, ...] = (4, 16, 64, 256)  # P: numbers of stored patterns
    betas: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)  # inverse temperatures β
    noise: float = 0.2  # r: the query is x_i + r u, u a uniform unit vector
    queries: int = 512  # queries per (P, β): ⌈queries / P⌉ draws of P patterns, min(P, queries) queries each
    tolerance: float = 1e-6  # softmax counts as retrieved within this distance (it is never exact)
    maps: tuple[str, ...] = MAPS
    seed: int = 0


def draw(P: int, d: int, noise: float, generator: torch.Generator, queries: int | None = None):
    """(X (P, d) unit patterns, xi (q, d) queries x_i + noise·u for the first q = min(P, queries) patterns, targets)."""
    X = unit_rows(generator, torch.float64, P, d)
    q = P if queries is None else min(P, queries)
    u = unit_rows(generator, torch.float64, q, d)
    return X, X[:q] + noise * u, torch.arange(q)


def _draws(config: RetrievalConfig, P: int, gen: torch.Generator) -> list:
    """The draws of one load P: ⌈queries / P⌉ sets of P patterns with min(P, queries) queries each."""
    return [draw(P, config.dim, config.noise, gen, config.queries)
            for _ in range(max(1, math.ceil(config.queries / P)))]


def retrieval_grid(config: RetrievalConfig = RetrievalConfig()) -> dict:
    """One row per (map, P, β): counts of exact / within-tolerance retrievals and of both conditions (see above)."""
    gen = torch.Generator().manual_seed(config.seed)
    rows = []
    for P in config.loads:
        if P < 2:
            raise ValueError(f"every load P must be >= 2 (a margin needs another pattern), got {P}")
        draws = _draws(config, P, gen)
        for kind in config.maps:
            m = sh.margin(kind)
            for beta in config.betas:
                row = {"map": kind, "P": P, "beta": beta, "n": 0, "exact": 0, "close": 0, "query_cond": 0,
                       "ball_cond": 0, "query_violations": 0, "ball_violations": 0, "support": 0.0,
                       "bitwise": 0}
                for X, xi, target in draws:
                    weights = sh.regulariser(kind).prediction(beta * xi @ X.T)
                    new = weights @ X  # the state after one step, Xᵀŷ (written ξ + (Xᵀŷ − ξ) it would round)
                    one_hot = torch.nn.functional.one_hot(target, P).to(weights.dtype)
                    exact = (weights == one_hot).all(-1)
                    row["bitwise"] += int(((new == X[target]).all(-1) & exact).sum())
                    close = (new - X[target]).norm(dim=-1) <= config.tolerance
                    query_cond = beta * sh.query_margin(xi, X, target) >= m
                    radius = (xi - X[target]).norm(dim=-1)  # = noise (up to rounding)
                    ball_cond = sh.pattern_separation(X)[target] >= m / beta + 2 * radius
                    row["n"] += len(target)
                    row["exact"] += int(exact.sum())
                    row["close"] += int(close.sum())
                    row["query_cond"] += int(query_cond.sum())
                    row["ball_cond"] += int(ball_cond.sum())
                    row["query_violations"] += int((query_cond != exact).sum())
                    row["ball_violations"] += int((ball_cond & ~exact).sum())
                    row["support"] += float((weights > 0).sum(-1).double().sum())
                row["support"] /= row["n"]
                rows.append(row)
    return {"config": asdict(config), "rows": rows}


def rate(result: dict, kind: str, key: str = "exact") -> torch.Tensor:
    """(len(loads), len(betas)) share of queries with ``key`` ("exact", "close", "query_cond", "ball_cond")."""
    cfg = result["config"]
    out = torch.zeros(len(cfg["loads"]), len(cfg["betas"]), dtype=torch.float64)
    for row in result["rows"]:
        if row["map"] == kind:
            out[cfg["loads"].index(row["P"]), cfg["betas"].index(row["beta"])] = row[key] / row["n"]
    return out


def capacity_rows(kind: str, config: hc.CapacityConfig = hc.CapacityConfig(), max_P: int = 2048) -> list[dict]:
    """Chapter 3's capacity protocol (:func:`energylab.experiments.hopfield_capacity.capacity`: patterns on the
    sphere of radius K√(d−1), query x_i + ρMu, retrieved when ONE update lands within τM, the same draws and seeds)
    with the map ``kind`` in place of softmax, for P up to ``max_P``: one row per d, ``{"d", "P", "rate",
    "capacity"}``, where capacity is P* as there, or None when no grid P up to max_P failed (then P* ≥ max_P)."""
    weights = sh.regulariser(kind).prediction
    rows = []
    for d in config.dims:
        row = {"d": d, "P": [], "rate": [], "capacity": None}
        for k, P in enumerate(hc.grid(config.per_octave)):
            if P > max_P:
                break
            g = torch.Generator().manual_seed(1_000_003 * config.seed + 1_000 * d + k)  # hopfield_capacity's seeds
            f, n = hc.failures(d, P, config, g, weights)
            row["P"].append(P), row["rate"].append(f / n)
            if f / n > config.max_error:
                row["capacity"] = row["P"][-2] if len(row["P"]) > 1 else 0
                break
        rows.append(row)
    return rows


def metastable_sets(config: RetrievalConfig = RetrievalConfig(), iterations: int = 200,
                    tolerance: float = 1e-12) -> dict:
    """Where the update ξ ← Xᵀŷ_Ω(βXξ), iterated from the queries of :func:`retrieval_grid`, comes to rest, for each
    sparse map of ``config.maps`` (softmax's support is always all P patterns) and each (P, β): one row with the
    number of queries ``n``, how many ``converged`` (two successive states within ``tolerance``, at most
    ``iterations`` updates), the histogram ``sizes`` of the final support (``sizes[k]`` queries rest on k + 1
    patterns; a support of more than one pattern is a metastable set: the fixed point is a convex combination of
    those patterns, not any one of them), and ``has_target``, the queries whose final support contains the pattern
    they were drawn near. Same draws as :func:`retrieval_grid` (same seed)."""
    gen = torch.Generator().manual_seed(config.seed)
    rows = []
    for P in config.loads:
        draws = _draws(config, P, gen)
        for kind in (k for k in config.maps if k != "softmax"):
            prediction = sh.regulariser(kind).prediction
            for beta in config.betas:
                row = {"map": kind, "P": P, "beta": beta, "n": 0, "converged": 0, "has_target": 0,
                       "sizes": [0] * P}
                for X, xi, target in draws:
                    for _ in range(iterations):
                        new = prediction(beta * xi @ X.T) @ X
                        done = (new - xi).norm(dim=-1) <= tolerance
                        xi = new
                        if bool(done.all()):
                            break
                    weights = prediction(beta * xi @ X.T)
                    support = weights > 0
                    row["n"] += len(target)
                    row["converged"] += int(done.sum())
                    row["has_target"] += int(support[torch.arange(len(target)), target].sum())
                    for size in support.sum(-1).tolist():
                        row["sizes"][size - 1] += 1
                rows.append(row)
    return {"config": asdict(config), "iterations": iterations, "tolerance": tolerance, "rows": rows}


def set_share(result: dict, kind: str, at_least: int = 2) -> torch.Tensor:
    """(len(loads), len(betas)) share of queries of :func:`metastable_sets` that rest on ``at_least`` patterns or
    more (2: in a metastable set)."""
    cfg = result["config"]
    out = torch.zeros(len(cfg["loads"]), len(cfg["betas"]), dtype=torch.float64)
    for row in result["rows"]:
        if row["map"] == kind:
            out[cfg["loads"].index(row["P"]), cfg["betas"].index(row["beta"])] = \
                sum(row["sizes"][at_least - 1:]) / row["n"]
    return out
