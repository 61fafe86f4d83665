"""Hyper-SET: one shared layer that descends two energies on hyperspheres, iterated (paper 004, Sec. 4).

One iteration t = 1..T of :class:`HyperSETLayer` (tokens are rows, x (B, N, d); heads W_h (d_h × d), H d_h = d):

    Z^h   = RMSNorm(x W_hᵀ)                                   (B, H, N, d_h): one W_h is query, key and value
    x    ← x + α_t ⊙ u_ATTN(x),   u_ATTN = −Σ_h [(A + Aᵀ) Z^h] W_h,   A = softmax_row(β Z^h Z^hᵀ),  β = 1/√d_h
    x    ← x + γ_t ⊙ u_FF(x),     u_FF   = D ReLU(RMSNorm(Dᵀ x))                               D (d, M)

Sign convention: u_ATTN and u_FF are the catalog's operators ``hyperset_attention_update`` and
``hyperset_feedforward_update`` with ``rms=True`` (:mod:`energylab.forms.hyperspherical`), which return −∇E
evaluated at the normalised projections. So the attention step is x + α ⊙ (−∇E_ATTN), which is the paper's
eq. 9, x − α_t Σ_h W_h Z (softmax_col + softmax_row): the authors' attention returns +∇E and their layer
subtracts it. The RMSNorm Jacobian is dropped (eq. 9), as in the paper.

Step sizes α_t, γ_t ∈ R^d per token and channel (Table 5): c_t = Lin(d→d) GELU Lin(e→d) sin_e(t) from a sinusoidal
embedding of t (width e: 512 in the paper, ``time_dim`` here, default d), then [α_t, γ_t] = Lin(d→2d)(GELU(c_t +
RMSNorm(u))) with u = x_0 (``condition="x0"``: Sudoku, as the authors' Sudoku code) or u = x_t (``"xt"``: the image
models, as the paper's App. D.3). Only the last Linear is zero-initialised, so at initialisation the layer is the
identity and the time maps still learn (see :class:`StepSizes` for why not all three). Variants:
the attention energies of Table 18 (``attention="sigmoid"``, ``"linear"``), the feedforward energies of Table 19
(``feedforward="softmax"``, ``"gated"``), fixed step sizes α_t = γ_t = s (``step=s``, Table 3) and depth-wise LoRA
(``lora_rank=r``: W + B_t A_t and D + B'_t A'_t per iteration, Table 4). ``gains=True`` gives the projections
learnable RMSNorm gains (separate for query, key, value and the hidden units), as the authors' code does; with gains
the update is no longer the exact gradient of E_ATTN, so the default (the paper's layer) has none.

Hooks without side effects: :meth:`HyperSETLayer.energies` (E_ATTN and E_FF after normalisation, Fig. 5) and
:meth:`HyperSETLayer.metrics` (energies, effective ranks and average angles, Fig. 6), to be passed to
``LoopedModel.trace``. Registered looped layers: "hyperset", "hyperset-sigmoid", "hyperset-linear",
"hyperset-softmaxff", "hyperset-gatedff", "hyperset-fixed0.1", "hyperset-fixed0.5", "hyperset-lora<r>" (r = 2, 4,
8; adapters for T = 8 iterations, later iterations reuse the last), "hyperset-gains", "hyperset-zeroinit" (all three
step-size maps zero-initialised, as the authors' Sudoku code: step sizes constant over t), "hyperset-inject" (the
embedded board added to the state before every iteration, as the looped Transformer and ItrSA do; not the paper's).
The image classifier built on it is :class:`energylab.models.hyperset.HyperSET`.
"""
from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from energylab import kernels
from energylab._checks import (
    check_bool,
    check_count,
    check_divides,
    check_int,
    check_number,
    check_positive,
)
from energylab.forms import hyperspherical as hs
from energylab.forms.hyperspherical import (
    gated_feedforward_energy,
    hyperset_attention_energy,
    hyperset_feedforward_energy,
    kernel_linear_attention_energy,
    sigmoid_attention_energy,
    softmax_feedforward_energy,
)
from energylab.kernels import fused_attention as fz
from energylab.kernels import hyperset_layer as hk
from energylab.layers.registry import register_layer
from energylab.sphere import average_angle, effective_rank, mean_pairwise_angle

__all__ = ["sinusoidal_embedding", "StepSizes", "HyperSETLayer", "ATTENTIONS", "FEEDFORWARDS", "VARIANTS"]

# the catalog operators the layer computes through (−∇E at the normalised projections / hidden units)
ATTENTION_OPERATORS = {"bisoftmax": hs.hyperset_attention_update, "sigmoid": hs.sigmoid_attention_update,
                       "linear": hs.kernel_linear_attention_update}
FEEDFORWARD_OPERATORS = {"relu": hs.hyperset_feedforward_update, "softmax": hs.softmax_feedforward_update,
                         "gated": hs.gated_feedforward_update}
ATTENTIONS = {"bisoftmax": hyperset_attention_energy, "sigmoid": sigmoid_attention_energy,
              "linear": kernel_linear_attention_energy}
FEEDFORWARDS = {"relu": hyperset_feedforward_energy, "softmax": softmax_feedforward_energy,
                "gated": gated_feedforward_energy}


def sinusoidal_embedding(t: torch.Tensor, width: int) -> torch.Tensor:
    """[cos(t ω_k), sin(t ω_k)], ω_k = 10000^(−k/(width/2)): (...) -> (..., width) (width even)."""
    if not isinstance(t, torch.Tensor) or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"t must be a real torch.Tensor of positions, got {getattr(t, 'dtype', type(t).__name__)}")
    width = _check_width("width", width)
    if t.is_floating_point() and not torch.isfinite(t).all():
        raise ValueError("t contains NaN or inf")
    return _sinusoidal(t, width)


def _check_width(name: str, width) -> int:
    """An even int >= 2: the width of a sinusoidal embedding (cos and sin of width/2 frequencies)."""
    width = check_int(name, width, minimum=2)
    if width % 2:
        raise ValueError(f"{name} must be an even int >= 2 (cos and sin of width/2 frequencies), got {width}")
    return width


def _step_embedding(t: float, width: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """sin_e(t) for the step sizes, made once per iteration number, width, dtype and device: the same bits as
    making it every call, without its ten small ops per iteration (4% of one iteration at the 4x4 Sudoku size).
    Shared, so never written to (the time map only reads it). Not cached while torch.compile traces (a fake
    tensor must not outlive its trace)."""
    if torch.compiler.is_compiling():
        return _make_embedding(t, width, dtype, device)
    return _cached_embedding(t, width, dtype, device)


def _make_embedding(t: float, width: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return _sinusoidal(torch.tensor(t, device=device), width).to(dtype)


@functools.lru_cache(maxsize=1024)
def _cached_embedding(t: float, width: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    with torch.inference_mode(False):  # made under inference mode, it could not be saved for a later backward
        return _make_embedding(t, width, dtype, device)


def _sinusoidal(t: torch.Tensor, width: int) -> torch.Tensor:
    """:func:`sinusoidal_embedding` without the checks (the step sizes check their Python t once, on the host)."""
    half = width // 2
    omega = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float64) / half)
    args = t.double().unsqueeze(-1) * omega.to(t.device)
    return torch.cat([args.cos(), args.sin()], -1)


class StepSizes(nn.Module):
    """α_t, γ_t (B, N, d) from t and a condition u (x_0 or x_t): Lin(d→2d) GELU(c_t + RMSNorm(u)) (Table 5, eq. 12).

    Only the last map is zero-initialised (ReZero-style: α = γ = 0, the layer is the identity at initialisation).
    Zero-initialising all three maps, as Table 5's description and the authors' Sudoku code do, is a saddle: the
    time map's output c_t = 0 has gradient ∝ ``out.weight`` and ``time[2]``'s ∝ GELU(time[0](e)) = 0, so neither
    time map ever moves except ``time[2].bias``, and α_t, γ_t stay constant over t (a test checks both cases)."""

    def __init__(self, dim: int, time_dim: int | None = None, zero_all: bool = False):
        super().__init__()
        dim = check_int("dim", dim, minimum=1)
        check_bool("zero_all", zero_all)
        self.time_dim = dim + dim % 2 if time_dim is None else _check_width("time_dim", time_dim)
        self.time = nn.Sequential(nn.Linear(self.time_dim, dim), nn.GELU(), nn.Linear(dim, dim))
        self.out = nn.Linear(dim, 2 * dim)
        # zero_all=True: the authors' Sudoku initialisation, the saddle (layer "hyperset-zeroinit", for comparison)
        for lin in (self.time[0], self.time[2], self.out) if zero_all else (self.out,):
            nn.init.zeros_(lin.weight)
            nn.init.zeros_(lin.bias)

    def forward(self, t: int, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = check_number("t", t)  # a Python number, checked on the host: no device sync per iteration
        if not math.isfinite(t):
            raise ValueError(f"t must be a finite iteration number, got {t}")
        c = self.time(_step_embedding(t, self.time_dim, u.dtype, u.device))  # (d,)
        return self.out(F.gelu(c + F.rms_norm(u, (u.shape[-1],)))).chunk(2, dim=-1)


def _rms(u: torch.Tensor, gain: torch.Tensor | None, eps: float) -> torch.Tensor:
    return F.rms_norm(u, (u.shape[-1],), weight=gain, eps=eps)


class HyperSETLayer(nn.Module):
    """One Hyper-SET iteration (see the module docstring); called as ``layer(x, c, t=t, x0=x0)``.

    dim d, heads H (d_h = d/H), ffn_mult: M = ffn_mult·d hidden units of D. The injected input c is not used:
    the input enters through x_0 (the starting state, and with ``condition="x0"`` the step sizes' condition).
    """

    takes_step = True

    def __init__(self, dim: int, heads: int, ffn_mult: int = 4, attention: str = "bisoftmax",
                 feedforward: str = "relu", step: float | None = None, lora_rank: int = 0, lora_iterations: int = 8,
                 gains: bool = False, time_dim: int | None = None, condition: str = "x0", zero_init_all: bool = False,
                 inject: bool = False, eps: float = 1e-6):
        super().__init__()
        if condition not in ("x0", "xt"):
            raise ValueError(f"condition must be 'x0' or 'xt', got {condition!r}")
        dim, ffn_mult = check_int("dim", dim, minimum=1), check_int("ffn_mult", ffn_mult, minimum=1)
        lora_rank = check_int("lora_rank", lora_rank, minimum=0)
        lora_iterations = check_int("lora_iterations", lora_iterations, minimum=1)
        step = None if step is None else check_positive("step", step, scalar=True)  # fixed step sizes α = γ
        eps = check_positive("eps", eps, allow_zero=True, scalar=True)  # the RMSNorm ε: NaN made every state NaN
        for flag, value in (("gains", gains), ("zero_init_all", zero_init_all), ("inject", inject)):
            check_bool(flag, value)
        self.condition = condition
        self.inject = inject  # add the injected input c before each iteration (not the paper's layer; a probe)
        self.head_dim = dim // check_divides("heads", heads, dim)
        if attention not in ATTENTIONS or feedforward not in FEEDFORWARDS:
            raise ValueError(f"attention must be one of {sorted(ATTENTIONS)} and feedforward one of "
                             f"{sorted(FEEDFORWARDS)}, got {attention!r} and {feedforward!r}")
        self.dim, self.heads, self.hidden = dim, heads, ffn_mult * dim
        self.attention, self.feedforward, self.step, self.eps = attention, feedforward, step, eps
        self.beta = 1 / math.sqrt(self.head_dim)
        bound = 1 / math.sqrt(dim)  # nn.Linear's default scale
        self.W = nn.Parameter(torch.empty(dim, dim).uniform_(-bound, bound))  # rows: heads' rows W_h stacked
        self.D = nn.Parameter(torch.empty(dim, self.hidden).uniform_(-bound, bound))  # (d, M), columns d_m
        self.gains = nn.Parameter(torch.ones(3, self.head_dim)) if gains else None  # query, key, value
        self.ff_gain = nn.Parameter(torch.ones(self.hidden)) if gains else None
        self.steps = StepSizes(dim, time_dim, zero_init_all) if step is None else None
        # None, or an iteration t_max: iterations t > t_max reuse the step sizes of t_max (running the loop past the
        # training T without time embeddings the step-size network never saw)
        self.step_horizon: int | None = None
        self.lora_rank = lora_rank
        if lora_rank:  # B zero (the adapters start at 0), A random; one pair per iteration
            self.lora_W_A = nn.Parameter(torch.randn(lora_iterations, lora_rank, dim) / math.sqrt(dim))
            self.lora_W_B = nn.Parameter(torch.zeros(lora_iterations, dim, lora_rank))
            self.lora_D_A = nn.Parameter(torch.randn(lora_iterations, lora_rank, self.hidden) / math.sqrt(dim))
            self.lora_D_B = nn.Parameter(torch.zeros(lora_iterations, dim, lora_rank))

    # ------------------------------------------------------------------ weights and the two updates
    def weights(self, t: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(W (H, d_h, d), D (d, M)) at iteration t, with the depth-wise LoRA adapter of t (t > T: the last)."""
        W, D = self.W, self.D
        if t is not None:
            t = check_int("t", t, minimum=1)  # the iteration, 1..T: 1.5 was an IndexError, 0 or -3 read as t = 1
        if self.lora_rank and t is not None:
            k = min(max(t, 1), self.lora_W_A.shape[0]) - 1
            W = W + self.lora_W_B[k] @ self.lora_W_A[k]
            D = D + self.lora_D_B[k] @ self.lora_D_A[k]
        return W.view(self.heads, self.head_dim, self.dim), D

    def projections(self, x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        """z_iʰ = W_h x_i: (B, N, d) -> (B, H, N, d_h), before normalisation."""
        B, N, _ = x.shape
        return (x @ W.flatten(0, 1).T).view(B, N, self.heads, self.head_dim).transpose(1, 2)

    def attention_update(self, x: torch.Tensor, t: int | None = None) -> torch.Tensor:
        """−∇E_ATTN at the normalised projections (catalog sign): (B, N, d) -> (B, N, d). Without gains it is the
        catalog's operator of the form (or, for bi-softmax, its one-exponential fast path); with gains query, key
        and value are normalised apart, which is not the gradient of an energy, so it is written out here."""
        W, _ = self.weights(t)
        check_count("x", x, -2, why="attention needs at least one key")  # every route: the fast one has no max over 0
        fast = self.gains is None and self.attention == "bisoftmax" and kernels.enabled()
        if self.gains is None and not fast:
            return ATTENTION_OPERATORS[self.attention](x, W, self.beta, rms=True, eps=self.eps)
        if fast:  # one exponential for both softmaxes (fast path "one-exp-bisoftmax"; q is on the √d_h sphere)
            B, N, _ = x.shape
            z = (x @ W.flatten(0, 1).T).view(B, N, self.heads, self.head_dim)  # the projections, per head
            if fz.usable(z, "fused-bisoftmax"):  # outside pinned processes: the C tile loop, faster still (issue 55)
                # reads z through its strides, RMS-normalises it inside, and writes y in z's layout (no copies)
                y = fz.bisoftmax(z.transpose(1, 2), self.beta, eps=self.eps)
            else:  # normalised in the projection's own layout (B, N, H, d_h), then viewed per head
                q = _rms(z, None, self.eps).transpose(1, 2)
                y = hk.bisoftmax_one_exp(q.flatten(0, 1), self.beta).view(q.shape)
        else:  # gains: query, key and value each with its own
            z = self.projections(x, W)
            q, k, v = (_rms(z, g, self.eps) for g in self.gains.unbind(0))
            if self.attention == "linear":  # Φ'(q) ⊙ β Φ(q) (Φ(k)ᵀ Φ(v)), Φ = σ: linear in N
                pq = torch.sigmoid(q)
                y = pq * (1 - pq) * (self.beta * pq @ (torch.sigmoid(k).transpose(-1, -2) @ torch.sigmoid(v)))
            elif self.attention == "bisoftmax":  # query and key differ, s is not symmetric
                s = self.beta * q @ k.transpose(-1, -2)  # (B, H, N, N)
                y = (torch.softmax(s, -1) + torch.softmax(s, -2)) @ v  # softmax_row + softmax_col
            else:
                sig = torch.sigmoid(self.beta * q @ k.transpose(-1, -2))
                y = (sig * (1 - sig)) @ v
        # the sign rides on the (d, d) weight, not on the (B, N, d) update (exact: negation commutes with rounding)
        return y.transpose(1, 2).reshape(x.shape) @ -W.flatten(0, 1)

    def feedforward_update(self, x: torch.Tensor, t: int | None = None) -> torch.Tensor:
        """−∇E_FF at the normalised hidden units: D φ(RMSNorm(Dᵀx)) (catalog sign). (B, N, d) -> (B, N, d). Without
        a gain, the catalog's operator (or the fused ReLU fast path); with one, written out here."""
        _, D = self.weights(t)
        if self.ff_gain is None:
            if self.feedforward == "relu" and kernels.enabled():
                return hk.relu_sphere_feedforward(x, D, self.eps)  # fast path "fused-relu-feedforward"
            return FEEDFORWARD_OPERATORS[self.feedforward](x, D, rms=True, eps=self.eps)
        h = _rms(x @ D, self.ff_gain, self.eps)  # (B, N, M)
        if self.feedforward == "relu":
            phi = torch.relu(h)
        elif self.feedforward == "softmax":
            phi = torch.softmax(h, -1)
        else:
            s = torch.sigmoid(h)
            phi = s.sum(-1, keepdim=True) * s * (1 - s)
        return phi @ D.T

    def step_sizes(self, x0: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(α_t, γ_t), each broadcastable to (B, N, d)."""
        if self.steps is None:
            s = torch.full((), float(self.step), dtype=x0.dtype, device=x0.device)
            return s, s
        return self.steps(t if self.step_horizon is None else min(t, self.step_horizon), x0)

    def half_step(self, x: torch.Tensor, t: int = 1, x0: torch.Tensor | None = None) -> torch.Tensor:
        """The state after iteration t's attention half only, x + α_t ⊙ u_ATTN(x) (to split an energy change
        between the two halves)."""
        alpha, _ = self.step_sizes(x if x0 is None or self.condition == "xt" else x0, t)
        return x + alpha * self.attention_update(x, t)

    def attention_after_halves(self, states: list[torch.Tensor], x0: torch.Tensor) -> list[torch.Tensor]:
        """E_ATTN (B,) after each iteration's attention half, from the states [x_0, x_1, ..., x_T'] (t = 1..T'):
        with E_ATTN at the states it splits each change of E_ATTN between the two halves."""
        return [self.energies(self.half_step(states[t - 1], t, x0=x0), t)["attention"] for t in range(1, len(states))]

    def _check_states(self, x) -> None:
        """x must be a floating (B, N, d) tensor: shape and dtype only (no test of the values, which would
        synchronise a device on every iteration)."""
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise TypeError(f"x must be a floating-point torch.Tensor of states (B, N, d), "
                            f"got {getattr(x, 'dtype', type(x).__name__)}")
        if x.dim() != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape (B, N, d={self.dim}), got {tuple(x.shape)}")

    def forward(self, x: torch.Tensor, c: torch.Tensor | None = None, t: int = 1,
                x0: torch.Tensor | None = None) -> torch.Tensor:
        self._check_states(x)
        check_int("t", t, minimum=1)  # the iteration, 1..T
        if x0 is not None and (not isinstance(x0, torch.Tensor) or x0.shape != x.shape):
            raise ValueError(f"x0 must be a tensor of the states' shape {tuple(x.shape)}, got "
                             f"{tuple(x0.shape) if isinstance(x0, torch.Tensor) else type(x0).__name__}")
        if self.inject and c is not None:
            x = x + c
        alpha, gamma = self.step_sizes(x if x0 is None or self.condition == "xt" else x0, t)
        x = torch.addcmul(x, alpha, self.attention_update(x, t))
        return torch.addcmul(x, gamma, self.feedforward_update(x, t))

    # ------------------------------------------------------------------ hooks (no side effects)
    def normalised(self, x: torch.Tensor, t: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(Z (B, H, N, d_h), U (B, N, M)): the projections on their spheres, without gains."""
        self._check_states(x)
        W, D = self.weights(t)
        return _rms(self.projections(x, W), None, self.eps), _rms(x @ D, None, self.eps)

    def energies(self, x: torch.Tensor, t: int | None = None) -> dict[str, torch.Tensor]:
        """{"attention": E_ATTN (B,), "feedforward": E_FF (B,)} after normalisation (Fig. 5), through the catalog's
        energies: E(Z) with identity projections per head, E(U) with an identity dictionary."""
        Z, U = self.normalised(x, t)
        B, H, N, dh = Z.shape
        eye = torch.eye(H * dh, dtype=x.dtype, device=x.device).view(H, dh, H * dh)
        tokens = Z.transpose(1, 2).reshape(B, N, H * dh)
        e_attn = ATTENTIONS[self.attention](tokens, eye, self.beta)
        e_ff = FEEDFORWARDS[self.feedforward](U, torch.eye(U.shape[-1], dtype=x.dtype, device=x.device))
        return {"attention": e_attn, "feedforward": e_ff}

    def energy(self, x: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        """E_ATTN + E_FF after normalisation, (B,)."""
        e = self.energies(x)
        return e["attention"] + e["feedforward"]

    def metrics(self, x: torch.Tensor, t: int | None = None) -> dict[str, torch.Tensor]:
        """Energies (B,), and of each head's normalised projections (B, H) and of the full tokens (B,): the effective
        rank and the average angle in degrees, both as the paper defines it (arccos of the mean cosine,
        ``average_angle``) and as the authors' code computes it (mean of pairwise arccos, ``mean_pairwise_angle``)."""
        Z, _ = self.normalised(x, t)
        out = self.energies(x, t)
        out.update(effective_rank=effective_rank(Z), effective_rank_full=effective_rank(x),
                   average_angle=average_angle(Z), mean_pairwise_angle=mean_pairwise_angle(Z),
                   average_angle_full=average_angle(x))
        return out


VARIANTS = {"": {}, "sigmoid": {"attention": "sigmoid"}, "linear": {"attention": "linear"},
            "softmaxff": {"feedforward": "softmax"}, "gatedff": {"feedforward": "gated"},
            "fixed0.1": {"step": 0.1}, "fixed0.5": {"step": 0.5}, "lora2": {"lora_rank": 2},
            "lora4": {"lora_rank": 4}, "lora8": {"lora_rank": 8}, "gains": {"gains": True},
            "zeroinit": {"zero_init_all": True}, "inject": {"inject": True}}
for _name, _kwargs in VARIANTS.items():
    register_layer("hyperset" + (f"-{_name}" if _name else ""), functools.partial(HyperSETLayer, **_kwargs))
