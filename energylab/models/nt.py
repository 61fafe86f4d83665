"""The NT-task testbed of paper 001 (Gros): one decoder bilayer with DPA or expressive attention.

Tokens are one-hot symbols, d = N, with no positional embedding. With x_m ∈ R^d the token at position m,

    u_m = LN_1(x_m),   Q_m = W_Q u_m,   K_k = W_K u_k,   V_k = W_V u_k,   z_mk = Q_mᵀ K_k
    h_m = x_m + Σ_{k≤m} a_mk V_k,         a = DPA: exp(z_mk)/Z_m (β = 1)  or  EA: z²/(1+z²)/N_m (eqs. 1, 2)
    y_m = h_m + W_2 tanh(W_1 LN_2(h_m) + b_1) + b_2               (tanh FFN, width 4d)
    ŷ   = W_out [y_1; …; y_Ncon] + b_out                          (readout: a (d·N_con) × d matrix)

trained with the squared error ‖ŷ − e_target‖²/d and read out greedily (argmax). Per-position weights
(``per_position=True``) give every position m its own W_Q, W_K, W_V, W_1, W_2, b_2; with LayerNorm without
gain/shift and no hidden bias (b_1 = 0) this reproduces the paper's counts exactly (802 for N = 2, N_con = 16;
≈ 4·10⁵ for N16T5 at N_con = 128) — an inference: the paper has no public code. ``affine=True``
adds LN(x) = γ ⊙ (x − mean)/std + β on both sublayers and b_1; ``per_position=False`` shares one bilayer
across positions.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from energylab._checks import check_bool, check_instance, check_int, value_checks_off
from energylab.forms.expressive import expressive_weights
from energylab.forms.free_energy import dot_product_weights
from energylab.tasks import one_hot

ATTENTIONS = ("DPA", "EA")
PAPER_PARAMETERS = {(2, 16): 802, (16, 128): 400_000}  # (N, N_con) -> count quoted in paper 001 (≈ for the 2nd)


@dataclass
class NTModelConfig:
    N: int = 16  # basis of the task = embedding dimension d
    n_con: int = 32  # context length N_con (the readout matrix depends on it)
    attention: str = "EA"  # "DPA" (softmax, β = 1) or "EA" (expressive attention)
    per_position: bool = True  # untied weights per position (matches the paper's parameter counts)
    ffn_mult: int = 4  # FFN width = ffn_mult · d
    affine: bool = False  # add LayerNorm gains/shifts and the hidden FFN bias b_1 (beyond the paper's count)


class NTModel(nn.Module):
    """Input: (B, N_con) int64 symbols. Output: (B, d) readout scores (and the (B, N_con, N_con) attention)."""

    def __init__(self, config: NTModelConfig):
        super().__init__()
        check_instance("config", config, NTModelConfig)
        if config.attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {ATTENTIONS}, got {config.attention!r}")
        for name, least in (("N", 2), ("n_con", 1), ("ffn_mult", 1)):
            check_int(f"config.{name}", getattr(config, name), minimum=least)
        for name in ("per_position", "affine"):
            check_bool(f"config.{name}", getattr(config, name))
        self.config = config
        d, n, h = config.N, config.n_con, config.ffn_mult * config.N
        p = n if config.per_position else 1  # number of independent weight sets
        self.W_Q = nn.Parameter(torch.randn(p, d, d) / d ** 0.5)  # (P, d_out, d_in)
        self.W_K = nn.Parameter(torch.randn(p, d, d) / d ** 0.5)
        self.W_V = nn.Parameter(torch.randn(p, d, d) / d ** 0.5)
        self.W_1 = nn.Parameter(torch.randn(p, h, d) / d ** 0.5)  # (P, 4d, d)
        self.W_2 = nn.Parameter(torch.randn(p, d, h) / h ** 0.5)  # (P, d, 4d)
        self.b_2 = nn.Parameter(torch.zeros(p, d))
        if config.affine:
            self.b_1 = nn.Parameter(torch.zeros(p, h))
            self.gamma = nn.Parameter(torch.ones(2, p, d))  # LayerNorm gains of the two sublayers
            self.beta = nn.Parameter(torch.zeros(2, p, d))  # LayerNorm shifts
        self.readout = nn.Linear(n * d, d)
        self.register_buffer("causal", torch.ones(n, n, dtype=torch.bool).tril(), persistent=False)

    def forward(self, symbols: torch.Tensor, return_attention: bool = False):
        n, d = self.config.n_con, self.config.N
        if not isinstance(symbols, torch.Tensor):
            raise TypeError(f"symbols must be an integer torch.Tensor (B, N_con={n}), got {type(symbols).__name__}")
        if symbols.dim() != 2 or symbols.shape[1] != n:
            raise ValueError(f"symbols must have shape (B, N_con={n}), got {tuple(symbols.shape)}")
        check_bool("return_attention", return_attention)
        x = one_hot(symbols, d, self.W_Q.dtype)  # (B, n, d)
        # a symbol outside 0..N-1 was an all-zero one-hot row, read as a token without a word; one read-back at entry,
        # skipped under the ensemble's vmap (where one_hot's zero row is the documented behaviour)
        if symbols.numel() and not value_checks_off():
            lo, hi = torch.stack(torch.aminmax(symbols)).tolist()
            if lo < 0 or hi >= d:
                raise ValueError(f"symbols must lie in 0..{d - 1} (the basis N={d}), got values {lo}..{hi}")
        u = self._layer_norm(x, 0)  # LN_1, (B, n, d)
        q = torch.einsum("med,bmd->bme", self.W_Q, u)  # Q_m = W_Q[m] u_m: (B, n, d)
        k = torch.einsum("med,bmd->bme", self.W_K, u)
        v = torch.einsum("med,bmd->bme", self.W_V, u)
        z = torch.einsum("bme,bke->bmk", q, k)  # z_mk = Q_mᵀ K_k: (B, n, n)
        a = (dot_product_weights(z, self.causal) if self.config.attention == "DPA"
             else expressive_weights(z, self.causal))  # (B, n, n), rows sum to 1 over k <= m
        h = x + torch.einsum("bmk,bke->bme", a, v)  # h_m = x_m + Σ_k a_mk V_k
        g = torch.einsum("mjd,bmd->bmj", self.W_1, self._layer_norm(h, 1))  # W_1 LN_2(h_m): (B, n, 4d)
        g = torch.tanh(g + self.b_1 if self.config.affine else g)
        y = h + torch.einsum("mdj,bmj->bmd", self.W_2, g) + self.b_2  # (B, n, d)
        out = self.readout(y.reshape(y.shape[0], n * d))  # flatten (B, n·d) -> (B, d)
        return (out, a) if return_attention else out

    def _layer_norm(self, x: torch.Tensor, i: int) -> torch.Tensor:
        u = nn.functional.layer_norm(x, (self.config.N,))
        return u * self.gamma[i] + self.beta[i] if self.config.affine else u


def squared_error(out: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The paper's squared-error loss, (1/(B·d)) Σ_b ‖ŷ_b − e_target(b)‖²: out (B, d), targets (B,) int64.

    Averaged over the d outputs as well as the batch (PyTorch's ``MSELoss`` default); summing over d instead
    multiplies the gradient by d and makes SGD at the paper's lr 0.02 diverge for N = 16.
    """
    _check_scores(out, targets)
    return ((out - one_hot(targets, out.shape[-1], out.dtype)) ** 2).mean()


def accuracy(out: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Fraction of greedy (argmax) predictions equal to the target, as a 0-d float tensor."""
    _check_scores(out, targets)
    return (out.argmax(-1) == targets).to(out.dtype).mean()




def _check_scores(out, targets) -> None:
    """out (B, d) floating scores and targets (B,) integer symbols, B >= 1 (shapes and dtypes only: no values read
    back, the loss is on the training path). A mean over no rows was NaN without a word."""
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        raise TypeError(f"out must be a floating-point torch.Tensor of scores (B, d), "
                        f"got {getattr(out, 'dtype', type(out).__name__)}")
    if not isinstance(targets, torch.Tensor) or targets.is_floating_point() or targets.is_complex() \
            or targets.dtype == torch.bool:
        raise TypeError(f"targets must be an integer torch.Tensor of symbols (B,), "
                        f"got {getattr(targets, 'dtype', type(targets).__name__)}")
    if out.dim() != 2 or targets.shape != out.shape[:1] or out.shape[0] == 0:
        raise ValueError(f"out must have shape (B, d) and targets (B,) with B >= 1, got {tuple(out.shape)} and "
                         f"{tuple(targets.shape)}")
