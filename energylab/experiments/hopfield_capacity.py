"""Storage capacity of the modern Hopfield network on random patterns, beside Ramsauer et al.'s Theorem 3 (chapter 3).

Patterns are drawn uniformly on the sphere of radius M = K√(d−1) in R^d (the setting of Ramsauer et al. 2021,
Theorem 3). A pattern x_i counts as **retrieved** when ONE update f(ξ) = X softmax(β Xᵀξ) from the corrupted query
ξ = x_i + ρ M u (u a uniformly random unit vector) lands within τM of it: ‖f(ξ) − x_i‖ ≤ τM. For each d the
failure rate (the share of queries not retrieved) is measured on a geometric grid of P, and the **capacity** P*(d)
is the largest grid P up to which the failure rate never exceeds ``max_error``.

:func:`capacity` runs the measurement, :func:`theorem3` evaluates the theorem's guarantee (its c, its bound
√p c^((d−1)/4) and whether its condition c ≥ (2/√p)^(4/(d−1)) holds), :func:`growth_per_dimension` fits
log P* against d; :func:`energylab.claims.hopfield.capacity_claims` states what chapter 3 says about a run (the
chapter and the tests call it on the same numbers).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

__all__ = ["CapacityConfig", "grid", "failures", "capacity", "lambert_w0", "theorem3", "growth_per_dimension"]


@dataclass(frozen=True)
class CapacityConfig:
    """One capacity measurement. Defaults: chapter 3's (about 3 s on one CPU thread)."""

    dims: tuple[int, ...] = (4, 6, 8, 10, 12, 14, 16)  # pattern dimensions d
    beta: float = 1.0  # inverse temperature β (fixed for every d)
    K: float = 1.0  # patterns on the sphere of radius M = K√(d−1) (Theorem 3's radius)
    corruption: float = 0.1  # ρ: the query is x_i + ρ M u, u a random unit vector
    tolerance: float = 0.2  # τ: retrieved when one update lands within τM of x_i
    max_error: float = 0.01  # the failure rate a capacity allows
    queries: int = 2000  # queries per (d, P): ⌈queries/P⌉ independent draws of P patterns, min(P, queries) each
    per_octave: int = 4  # grid points per doubling of P: P = round(2^(k/per_octave)), k ≥ per_octave
    beyond: int = 3  # grid points measured past the first failing P (the curves of the figure)
    chunk: int = 256  # queries per matrix product (memory: chunk x P floats)
    seed: int = 0


def grid(per_octave: int = 4, start: int = 2):
    """The P grid round(2^(k/per_octave)) from ``start`` upwards, without repeats (an endless generator)."""
    k, last = 0, None
    while True:
        P = round(2 ** (k / per_octave))
        k += 1
        if P >= start and P != last:
            last = P
            yield P


def failures(d: int, P: int, config: CapacityConfig, generator: torch.Generator, weights=None) -> tuple[int, int]:
    """(queries not retrieved, queries) for P random patterns in dimension d, in float64 (see the module text).
    ``weights``: the map from scores (..., P) to attention weights, softmax when None (chapter 12 passes sparse
    maps of :mod:`energylab.forms.sparse_hopfield`; the draws do not depend on it)."""
    weights = (lambda s: torch.softmax(s, dim=-1)) if weights is None else weights
    M = config.K * math.sqrt(d - 1)
    draws, q = max(1, math.ceil(config.queries / P)), min(P, config.queries)
    X = torch.randn(draws, P, d, generator=generator, dtype=torch.float64)
    X = M * X / X.norm(dim=-1, keepdim=True)  # (draws, P, d) on the sphere of radius M
    u = torch.randn(draws, q, d, generator=generator, dtype=torch.float64)
    xi = X[:, :q] + config.corruption * M * u / u.norm(dim=-1, keepdim=True)  # queries for the first q patterns
    failed = 0
    for a in range(0, q, config.chunk):
        b = min(q, a + config.chunk)
        new = weights(config.beta * xi[:, a:b] @ X.transpose(1, 2)) @ X  # one update (cross-attention)
        failed += int(((new - X[:, a:b]).norm(dim=-1) > config.tolerance * M).sum())
    return failed, draws * q


def capacity(config: CapacityConfig = CapacityConfig(), weights=None) -> dict:
    """Measure the failure rate against P for every d (``weights`` as in :func:`failures`: softmax when None);
    returns ``{"config", "rows"}`` with one row per d:
    ``{"d", "P": [...], "failed": [...], "queries": [...], "rate": [...], "capacity": P*}``. P* is the last grid P
    before the first one whose failure rate exceeds ``max_error`` (0 if already P = 2 fails)."""
    rows = []
    for d in config.dims:
        row = {"d": d, "P": [], "failed": [], "queries": [], "rate": [], "capacity": 0}
        first_bad = None
        for k, P in enumerate(grid(config.per_octave)):
            g = torch.Generator().manual_seed(1_000_003 * config.seed + 1_000 * d + k)
            f, n = failures(d, P, config, g, weights)
            row["P"].append(P), row["failed"].append(f), row["queries"].append(n), row["rate"].append(f / n)
            if first_bad is None and f / n > config.max_error:
                first_bad = len(row["P"]) - 1
                row["capacity"] = row["P"][first_bad - 1] if first_bad else 0
            if first_bad is not None and len(row["P"]) - 1 - first_bad >= config.beyond:
                break
        rows.append(row)
    return {"config": asdict(config), "rows": rows}


def lambert_w0(x: float) -> float:
    """The upper branch W₀ of the Lambert W function (w e^w = x) for x ≥ 0, by Halley's iteration."""
    if x < 0:
        raise ValueError(f"lambert_w0 is implemented for x >= 0, got {x}")
    w = math.log1p(x) if x < math.e else math.log(x) - math.log(math.log(x))
    for _ in range(100):
        e = math.exp(w)
        f = w * e - x
        step = f / (e * (w + 1) - (w + 2) * f / (2 * w + 2))
        w -= step
        if abs(step) <= 1e-15 * max(1.0, abs(w)):
            break
    return w


def theorem3(d: int, beta: float, K: float, p: float) -> dict:
    """Ramsauer et al. (2021), Theorem 3, for patterns on the sphere of radius K√(d−1) and failure probability p:
    a = 2/(d−1)·(1 + ln(2βK²p(d−1))), b = 2K²β/5, c = b / W₀(exp(a + ln b)); if c ≥ (2/√p)^(4/(d−1)) then with
    probability 1 − p at least √p c^((d−1)/4) random patterns can be stored. Returns {"c", "needed", "holds",
    "bound"} (``needed`` the right side of the condition). The condition is the bound in disguise: raising both sides
    to the power (d−1)/4 turns it into √p c^((d−1)/4) ≥ 2, so the theorem speaks only where it guarantees two."""
    a = 2 / (d - 1) * (1 + math.log(2 * beta * K ** 2 * p * (d - 1)))
    b = 2 * K ** 2 * beta / 5
    c = b / lambert_w0(math.exp(a + math.log(b)))
    needed = (2 / math.sqrt(p)) ** (4 / (d - 1))
    return {"c": c, "needed": needed, "holds": c >= needed, "bound": math.sqrt(p) * c ** ((d - 1) / 4)}


def growth_per_dimension(result: dict, min_capacity: int = 8) -> float:
    """exp(slope) of the least-squares line through (d, ln P*) over the d whose P* ≥ ``min_capacity`` (below it
    the grid is too coarse): the factor by which the capacity grows per added dimension."""
    pts = [(r["d"], math.log(r["capacity"])) for r in result["rows"] if r["capacity"] >= min_capacity]
    if len(pts) < 2:
        raise ValueError(f"need two dimensions with capacity >= {min_capacity}, got {len(pts)}")
    n = len(pts)
    md, ml = sum(d for d, _ in pts) / n, sum(v for _, v in pts) / n
    slope = sum((d - md) * (v - ml) for d, v in pts) / sum((d - md) ** 2 for d, _ in pts)
    return math.exp(slope)
