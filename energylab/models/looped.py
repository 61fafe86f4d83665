"""Looped models: one shared layer iterated T times on an embedded board, then a readout (papers 003 and 004).

    c = Embed(tokens) + P                      (B, N, d): digit embedding (0 = blank) plus learnable positions
    x_0 = c
    x_t = layer(x_{t-1}, c)   for t = 1..T     the SAME layer (same weights) every iteration; c is injected at
                                               every iteration for layers that use it (``inject=False``: None)
    logits = W_out RMSNorm(x_T)                (B, N, n): one class per digit 1..n

The layer is chosen by name from the registry of :mod:`energylab.layers` (``register_layer`` adds one: later
chapters add ItrSA, an AKOrN-style Kuramoto layer and Hyper-SET). A layer is an ``nn.Module`` built as ``builder(dim,
heads, ffn_mult)`` whose ``forward(x, c)`` maps (B, N, d) states (and the (B, N, d) input or None) to the next state;
it may define ``energy(x, c) -> (B,)`` for the energy hooks. A layer whose update depends on the iteration
(Hyper-SET's step sizes α_t, γ_t; a depth-wise adapter) sets ``takes_step = True`` and is called as
``layer(x, c, t=t, x0=x_0)`` with t = 1..T and x_0 the embedded board. Importing :mod:`energylab.layers` imports
every family, so the registry is complete in a fresh interpreter, whatever was imported before.

Per-iteration hooks, without side effects (forward stores nothing on the module):

* ``model(tokens, iterations=T, return_states=True)`` -> (logits, [x_1, ..., x_T]);
* ``model(tokens, T, start=x)`` iterates from the state x (B, N, d) instead of x_0 = c (c is still injected and is
  still the x_0 of step-dependent layers): perturbed starts for test-time voting (``experiments.sudoku_voting``);
* ``model.readouts(tokens, at=(4, 8, 16))`` -> {t: logits after t iterations}, one pass up to max(at);
* ``model.trace(tokens, T, hook)`` -> [hook(t, x_t, c) for t = 1..T] (energies, norms, per-iteration accuracy).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from energylab._checks import check_bool, check_instance, check_int, value_checks_off
from energylab.layers import layer_builder  # the package: importing it registers every layer family
from energylab.models import matmul_flops


@dataclass
class LoopedConfig:
    size: int = 4  # board side n (4, 6, 9): N = n² tokens, inputs 0..n (0 = blank), n classes
    dim: int = 64  # width d
    heads: int = 4  # attention heads H (d_h = d / H)
    ffn_mult: int = 4  # feed-forward width as a multiple of d
    layer: str = "transformer"  # a name in energylab.layers.LAYERS
    iterations: int = 8  # T used when forward is called without ``iterations`` (the training T)
    inject: bool = True  # pass c to the layer at every iteration (False: c = None, x_0 = c only)


def _check_digits(tokens: torch.Tensor, size: int) -> None:
    """Every token a digit 0..size (0 = blank): one read-back of the extremes, at entry (an out-of-range token was an
    IndexError of the embedding on the CPU and a device-side assert on a GPU). Skipped under torch.func transforms
    and torch.compile, like every check on tensor contents."""
    if tokens.numel() == 0 or value_checks_off():
        return
    lo, hi = torch.stack(torch.aminmax(tokens)).tolist()
    if lo < 0 or hi > size:
        raise ValueError(f"tokens must lie in 0..{size} (0 = blank, 1..{size} the digits), got values {lo}..{hi}")


class LoopedModel(nn.Module):
    """Embedding with learnable positions, one shared layer iterated, RMSNorm + linear readout (no biases)."""

    def __init__(self, config: LoopedConfig):
        super().__init__()
        check_instance("config", config, LoopedConfig)
        builder = layer_builder(config.layer)
        check_int("config.iterations", config.iterations, minimum=1)  # True passed as 1 before
        for name, least in (("size", 2), ("dim", 1), ("heads", 1), ("ffn_mult", 1)):
            check_int(f"config.{name}", getattr(config, name), minimum=least)
        check_bool("config.inject", config.inject)
        self.config = config
        n, d = config.size, config.dim
        self.embed = nn.Embedding(n + 1, d)  # token 0 = blank, 1..n = digits
        # (N, d) learnable positions, N(0, 1) like the digit embedding: at 0.02 the positions are drowned by the
        # digits and training sits on a plateau (measured: 36% vs 94% cell accuracy on 4×4 after 320 steps)
        self.pos = nn.Parameter(torch.randn(n * n, d))
        self.layer = builder(d, config.heads, config.ffn_mult)
        self.norm = nn.RMSNorm(d)
        self.head = nn.Linear(d, n, bias=False)

    def inputs(self, tokens: torch.Tensor) -> torch.Tensor:
        """c = Embed(tokens) + P: (B, N) ints in 0..n -> (B, N, d)."""
        if not isinstance(tokens, torch.Tensor) or tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"tokens must be an int64 (or int32) tensor of digits 0..{self.config.size} (0 = blank), "
                            f"got {getattr(tokens, 'dtype', type(tokens).__name__)}")
        if tokens.dim() != 2 or tokens.shape[1] != self.pos.shape[0]:
            raise ValueError(f"tokens must have shape (B, {self.pos.shape[0]}), got {tuple(tokens.shape)}")
        _check_digits(tokens, self.config.size)
        return self.embed(tokens) + self.pos

    def readout(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, d) states -> (B, N, n) logits."""
        return self.head(self.norm(x))

    def _steps(self, tokens: torch.Tensor, iterations: int | None, start: torch.Tensor | None = None):
        """Yield (t, x_t, c) for t = 1..T, from x_0 = c or from ``start``."""
        T = self.config.iterations if iterations is None else check_int("iterations", iterations, minimum=1)
        c = self.inputs(tokens)
        if start is not None and (not isinstance(start, torch.Tensor) or start.shape != c.shape):
            raise ValueError(f"start must be a tensor of the states' shape {tuple(c.shape)}, got "
                             f"{tuple(getattr(start, 'shape', ())) or type(start).__name__}")
        x, inject = c if start is None else start, c if self.config.inject else None
        takes_step = getattr(self.layer, "takes_step", False)
        for t in range(1, T + 1):
            x = self.layer(x, inject, t=t, x0=c) if takes_step else self.layer(x, inject)
            yield t, x, c

    def forward(self, tokens: torch.Tensor, iterations: int | None = None, return_states: bool = False,
                start: torch.Tensor | None = None):
        """Logits (B, N, n) after ``iterations`` (default config.iterations); with ``return_states`` also the
        list of the T states x_1..x_T, each (B, N, d); ``start`` (B, N, d): the state to iterate from (default
        x_0 = c, the embedded board)."""
        check_bool("return_states", return_states)
        states = []
        for _, x, _ in self._steps(tokens, iterations, start):
            if return_states:
                states.append(x)
        logits = self.readout(x)
        return (logits, states) if return_states else logits

    def readouts(self, tokens: torch.Tensor, at) -> dict[int, torch.Tensor]:
        """{t: logits after t iterations} for every t in ``at``, from one pass of max(at) iterations."""
        at = sorted({check_int("at[]", t, minimum=1) for t in at})  # 1.5 was truncated to 1, nan a raw error
        if not at:
            raise ValueError("at must hold at least one iteration count, got none")
        return {t: self.readout(x) for t, x, _ in self._steps(tokens, at[-1]) if t in at}

    def trace(self, tokens: torch.Tensor, iterations: int, hook: Callable) -> list:
        """[hook(t, x_t, c) for t = 1..iterations]: energies, norms, accuracies per iteration, as asked."""
        return [hook(t, x, c) for t, x, c in self._steps(tokens, iterations)]

    def work(self, iterations: int | None = None) -> int:
        """The work of answering one board at ``iterations`` (default config.iterations): the FLOPs of its matrix
        products (:func:`energylab.models.matmul_flops`), counted on a blank board (the work does not depend on
        the givens). What a score at T is compared at, beside the iteration count."""
        board = torch.zeros(1, self.config.size ** 2, dtype=torch.long, device=next(self.parameters()).device)
        return matmul_flops(self, board, iterations)

    def energy(self, x: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        """The layer's energy of states x (B, N, d) -> (B,); AttributeError if the layer defines none."""
        if not hasattr(self.layer, "energy"):
            raise AttributeError(f"layer {self.config.layer!r} defines no energy")
        return self.layer.energy(x, c if self.config.inject else None)
