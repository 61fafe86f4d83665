"""The NT suite of delayed-addition prediction tasks (Gros, paper 001, eqs. 4, 8, 9).

A series of symbols x(t) ∈ {0, …, N−1} continues deterministically from τ+1 random initial symbols:

    NT:    x(t) = [x(t−τ) + x(t−1−τ)] mod N                                   (eq. 4)
    NT-S:  x(t) = [Σ_{Δ=1}^{τ+1} x(t−Δ)] mod N                                 (eq. 8)
    NT-R:  NT-S if x(t−τ−1) = 0, else NT                                       (eq. 9)

"N16T2" names basis N = 16 and delay τ = 2. The state of a series is its last τ+1 symbols, so there are
N^(τ+1) states; NT and NT-S permute them (every state lies on a cycle), and the cycle structure measures how
hard a task is for a model that must memorise sequences rather than find the two relevant positions.

The learning task: from a window of N_con context symbols (one-hot, d = N) predict the next symbol.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import torch

VARIANTS = ("NT", "NT-S", "NT-R")
MAX_STATES = 2 ** 25  # cycle_lengths works on the full state space in memory; N16T5 has 2^24 states


def check_task(N: int, tau: int, variant: str = "NT") -> None:
    """ValueError naming the argument for N < 2, τ < 1 or an unknown variant."""
    if not isinstance(N, (int, np.integer)) or isinstance(N, bool) or N < 2:
        raise ValueError(f"N (the basis) must be an int >= 2, got {N!r}")
    if not isinstance(tau, (int, np.integer)) or isinstance(tau, bool) or tau < 1:
        raise ValueError(f"tau (the delay) must be an int >= 1, got {tau!r}")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")


def next_symbol(past: torch.Tensor, N: int, tau: int, variant: str = "NT") -> torch.Tensor:
    """x(t) from the τ+1 preceding symbols.

    past: (..., τ+1) integer tensor, past[..., -Δ] = x(t−Δ), i.e. oldest first.  ->  (...,) integer tensor.
    """
    x_tau, x_tau1 = past[..., -tau], past[..., -tau - 1]  # x(t−τ), x(t−1−τ)
    nt = (x_tau + x_tau1) % N
    if variant == "NT":
        return nt
    s = past[..., -tau - 1:].sum(-1) % N  # Σ_{Δ=1}^{τ+1} x(t−Δ)
    if variant == "NT-S":
        return s
    return torch.where(x_tau1 == 0, s, nt)  # NT-R


def series(N: int, tau: int, length: int, variant: str = "NT", n_series: int = 1,
           generator: torch.Generator | None = None) -> torch.Tensor:
    """``n_series`` series of ``length`` symbols, each from τ+1 uniformly random initial symbols.

    Returns an int64 tensor (n_series, length); the first τ+1 columns are the random initial conditions.
    """
    check_task(N, tau, variant)
    if not isinstance(length, int) or length < tau + 1:
        raise ValueError(f"length must be an int >= tau + 1 = {tau + 1}, got {length!r}")
    if not isinstance(n_series, int) or n_series < 1:
        raise ValueError(f"n_series must be a positive int, got {n_series!r}")
    x = torch.empty(n_series, length, dtype=torch.long)
    x[:, :tau + 1] = torch.randint(0, N, (n_series, tau + 1), generator=generator)
    for t in range(tau + 1, length):
        x[:, t] = next_symbol(x[:, t - tau - 1:t], N, tau, variant)
    return x


def windows(x: torch.Tensor, n_con: int, n_predict: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Sliding context windows and their next symbols.

    x: (S, L) series. Window i of series s is x[s, i : i+N_con], its target x[s, i+N_con], for
    i = 0 … n_predict−1 (default: all, L − N_con). Returns inputs (S·n_predict, N_con) and targets (S·n_predict,).
    """
    if x.dim() != 2:
        raise ValueError(f"x must have shape (S, L), got {tuple(x.shape)}")
    L = x.shape[1]
    n_predict = L - n_con if n_predict is None else n_predict
    if n_con < 1 or n_predict < 1 or n_con + n_predict > L:
        raise ValueError(f"need 1 <= n_con and 1 <= n_predict with n_con + n_predict <= series length {L}, "
                         f"got n_con={n_con}, n_predict={n_predict}")
    w = x.unfold(1, n_con + 1, 1)[:, :n_predict]  # (S, n_predict, N_con+1)
    return w[..., :n_con].reshape(-1, n_con), w[..., n_con].reshape(-1)


def batch(N: int, tau: int, n_con: int, n_predict: int, variant: str = "NT", n_series: int = 1,
          generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One epoch of the paper's protocol: a fresh series, its first N_con symbols as context, then the next
    ``n_predict`` symbols predicted one by one (teacher forcing). Returns (n_series·n_predict, N_con) inputs
    and (n_series·n_predict,) targets, as int64 symbols.
    """
    x = series(N, tau, max(n_con + n_predict, tau + 1), variant, n_series, generator)
    return windows(x, n_con, n_predict)


# ---------------------------------------------------------------------------------------- cycle structure


def state_map(N: int, tau: int, variant: str = "NT") -> np.ndarray:
    """The successor of every state, as an int64 array of length N^(τ+1).

    State code c = Σ_i d_i N^i with digits d_i = x(t−1−i), i = 0 … τ (d_0 the newest symbol).
    The successor of (d_0, …, d_τ) is (x(t), d_0, …, d_{τ−1}).
    """
    check_task(N, tau, variant)
    n_states = N ** (tau + 1)
    if n_states > MAX_STATES:
        raise ValueError(f"N^(tau+1) = {n_states} states exceed the in-memory limit {MAX_STATES}")
    codes = np.arange(n_states, dtype=np.int64)
    digits = np.stack([(codes // N ** i) % N for i in range(tau + 1)], axis=-1)  # (states, τ+1), newest first
    past = torch.from_numpy(digits[:, ::-1].copy())  # oldest first, as next_symbol expects
    new = next_symbol(past, N, tau, variant).numpy()
    return new + N * (codes % N ** tau)


def cycle_lengths(N: int, tau: int, variant: str = "NT") -> dict[int, int]:
    """Cycle length -> number of distinct cycles of the state map (exact).

    For NT and NT-S the map is a permutation, so Σ length·count = N^(τ+1). NT-R is not injective; its
    remaining states are transients that flow into these cycles.
    """
    nxt = state_map(N, tau, variant)
    n = len(nxt)
    image = nxt.copy()  # f^(2^k): its image is the set of states on cycles once 2^k >= number of states
    label = np.arange(n, dtype=np.int64)  # becomes the smallest state on each state's cycle
    jump, span = nxt.copy(), 1
    while span < n:
        label = np.minimum(label, label[jump])  # min over x, f(x), …, f^(2·span − 1)(x)
        jump = jump[jump]
        image = image[image]
        span *= 2
    on_cycle = np.zeros(n, dtype=bool)
    on_cycle[image] = True
    _, lengths = np.unique(label[on_cycle], return_counts=True)
    return dict(sorted(Counter(lengths.tolist()).items(), reverse=True))


def mean_cycle_length(N: int, tau: int, variant: str = "NT") -> float:
    """Mean length over distinct cycles, Σ length·count / Σ count (47.6 for N16T2, 23.8 for N16T2-S)."""
    cycles = cycle_lengths(N, tau, variant)
    return sum(length * count for length, count in cycles.items()) / sum(cycles.values())
