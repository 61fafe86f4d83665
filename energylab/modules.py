"""nn.Module layers built on the catalog's operators, for training.

Every layer maps x (B, N, d) -> (B, N, d) and returns the attention (or feedforward) *update* WITHOUT the
residual: the model adds x (and any step size) itself. Layers are device- and dtype-agnostic (float32,
bfloat16, float64); the causal flag masks future tokens (True where attention is allowed: j ≤ i).
Heads: H, d_h = d / H. Each layer's test checks it against its operator in :mod:`energylab.operators` /
:mod:`energylab.hyperspherical` on small float64 inputs.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from energylab import hyperspherical as hs
from energylab._checks import check_count, check_dim, check_divides, check_int, check_positive, check_tensor
from energylab.kernels import (
    _mask_rows,
    expressive_attention_values,
    newton_first_order_direction,
    ridge_inverse,
    row_blocks,
)
from energylab.operators import _dot_product_weights

__all__ = [
    "MultiHeadAttention",
    "ExpressiveAttention",
    "MHA2nd1st",
    "BiSoftmaxAttention",
    "SigmoidAttention",
    "KernelLinearAttention",
    "ReLUEnergyFeedforward",
    "SoftmaxEnergyFeedforward",
    "GatedEnergyFeedforward",
]


def _check_input(x, dim: int) -> None:
    """x must be (B, N ≥ 1, dim); finiteness is checked eagerly only (a data-dependent raise breaks torch.compile)."""
    if torch.compiler.is_compiling():
        return
    check_tensor("x", x, ndim=3)
    check_count("x", x, 1)
    check_dim("x", x.shape[-1], dim)


def _check_sizes(dim, heads=None) -> tuple[int, int | None]:
    """dim a positive int and, if given, heads a positive int dividing it; returned as ints."""
    dim = check_int("dim", dim, minimum=1)
    return dim, None if heads is None else check_divides("heads", heads, dim)


def _causal_mask(n: int, device) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()  # (N, N): True where j ≤ i


def _split_heads(t: torch.Tensor, heads: int) -> torch.Tensor:
    return t.unflatten(-1, (heads, -1)).transpose(1, 2)  # (B, N, d) -> (B, H, N, d_h)


def _merge_heads(t: torch.Tensor) -> torch.Tensor:
    return t.transpose(1, 2).flatten(-2)  # (B, H, N, d_h) -> (B, N, d)


class _QKVAttention(nn.Module):
    """Shared projections of the standard layers: W_Q, W_K, W_V, W_O (no bias, as in paper 000 eq. 11)."""

    def __init__(self, dim: int, heads: int, causal: bool):
        super().__init__()
        dim, heads = _check_sizes(dim, heads)
        self.dim, self.heads, self.causal = dim, heads, bool(causal)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)  # [W_Q; W_K; W_V]
        self.out = nn.Linear(dim, dim, bias=False)  # W_O = [W_{O,1} ... W_{O,H}]

    def _qkv(self, x):
        _check_input(x, self.dim)
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # each (B, N, d)
        return _split_heads(q, self.heads), _split_heads(k, self.heads), _split_heads(v, self.heads)


class MultiHeadAttention(_QKVAttention):
    """Standard MHA, Σ_h W_{O,h} Σ_j softmax_j(q_hᵀk_{j,h}/√d_h) v_{j,h} (paper 000 eq. 11 minus the residual).

    One gradient step on the multi-head free energy (Theorem 2). Uses F.scaled_dot_product_attention.
    Args: dim d, heads H (must divide d), causal (mask j > i). Parameters: 4d².
    """

    def __init__(self, dim: int, heads: int, causal: bool = True):
        super().__init__(dim, heads, causal)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._qkv(x)  # (B, H, N, d_h)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.out(_merge_heads(y))


class ExpressiveAttention(_QKVAttention):
    """Expressive attention: weights s²/(1+s²) normalised per row, s = scale · q_hᵀk_{j,h} (Gros, paper 001).

    Args: dim, heads, causal; scale multiplies the raw scores (None: 1/√d_h as in MHA; the paper uses 1).
    Parameters: 4d², like MHA.
    """

    def __init__(self, dim: int, heads: int, causal: bool = True, scale: float | None = None):
        super().__init__(dim, heads, causal)
        self.scale = 1 / math.sqrt(dim // heads) if scale is None else check_positive("scale", scale, scalar=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._qkv(x)  # (B, H, N, d_h)
        mask = _causal_mask(x.shape[1], x.device) if self.causal else None
        y = expressive_attention_values(q * self.scale, k, v, mask)  # (B, H, N, d_h), scores (B, H, N, N) inside
        return self.out(_merge_heads(y))


class MHA2nd1st(nn.Module):
    """Newton-inspired attention, Σ_h W_{O,h}[(q_h − k̄_h) + b_h] (paper 000, App. A.8, eqs. 29-31).

    p_{j,h} = softmax_j(q_hᵀk_{j,h}/T_h), k̄_h = Σ_j p_{j,h}k_{j,h}, G_h = W_{Q,h}W_{Q,h}ᵀ,
    b_h = G_h⁻¹(1/T'_h)[Σ_j p_{j,h} k_{j,h}(k_{j,h}ᵀu_h) − k̄_h(k̄_hᵀu_h)], u_h = G_h(q_h − k̄_h).
    No value map: 3d² attention parameters (W_Q, W_K, W_O) plus 2H temperatures. T_h, T'_h are learnable per
    head, initialised to d_h and kept positive through a log parametrisation (our choice). G_h⁻¹ is computed
    as (G_h + ridge·I)⁻¹ in float32: the paper does not say how G_h is stabilised; a small ridge is ours.
    Args: dim, heads, causal, ridge (≥ 0).
    """

    def __init__(self, dim: int, heads: int, causal: bool = True, ridge: float = 1e-4):
        super().__init__()
        dim, heads = _check_sizes(dim, heads)
        ridge = check_positive("ridge", ridge, allow_zero=True, scalar=True)
        self.dim, self.heads, self.causal, self.ridge = dim, heads, bool(causal), ridge
        d_h = dim // heads
        self.query = nn.Linear(dim, dim, bias=False)  # rows h·d_h..(h+1)·d_h are W_{Q,h}
        self.key = nn.Linear(dim, dim, bias=False)  # W_{K,h} likewise
        self.out = nn.Linear(dim, dim, bias=False)  # W_O = [W_{O,1} ... W_{O,H}]
        self.log_temperature = nn.Parameter(torch.full((heads,), math.log(d_h)))  # log T_h
        self.log_temperature_b = nn.Parameter(torch.full((heads,), math.log(d_h)))  # log T'_h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.dim)
        q = _split_heads(self.query(x), self.heads)  # (B, H, N, d_h)
        k = _split_heads(self.key(x), self.heads)
        T = self.log_temperature.exp().to(x.dtype).view(-1, 1, 1)  # (H, 1, 1)
        T_b = self.log_temperature_b.exp().to(x.dtype).view(-1, 1, 1)
        mask = _causal_mask(x.shape[1], x.device) if self.causal else None
        W_q = self.query.weight.unflatten(0, (self.heads, -1))  # (H, d_h, d): W_{Q,h}
        G = W_q @ W_q.transpose(-1, -2)  # (H, d_h, d_h)
        G_inv = ridge_inverse(G, self.ridge)
        k_t = k.transpose(-1, -2)  # (B, H, d_h, N)
        blocks = []
        for rows in row_blocks(q.shape[-2], k.shape[-2], q.shape[0] * q.shape[1]):  # cache-sized query blocks
            weights = _dot_product_weights(q[..., rows, :] @ k_t / T, _mask_rows(mask, rows))  # (B, H, n, N)
            blocks.append(newton_first_order_direction(q[..., rows, :], k, weights, G, T_b, self.ridge, G_inv))
        direction = torch.cat(blocks, dim=-2)  # (B, H, N, d_h)
        return self.out(_merge_heads(direction))


class _HypersphericalAttention(nn.Module):
    """One matrix W (d, d) plays query, key and value (paper 004); the layer returns −∇E at RMS-normalised
    projections. The symmetric energies couple every pair of tokens both ways, so their gradient sends
    information backwards in time: there is no causal version (causal=True raises).
    Args: dim, heads, causal (must be False), beta (None: 1/√d_h), rms (normalise z onto the √d_h sphere),
    eps (RMSNorm epsilon). Parameters: d².
    """

    update = None  # the operator of :mod:`energylab.hyperspherical`

    def __init__(self, dim: int, heads: int, causal: bool = False, beta: float | None = None,
                 rms: bool = True, eps: float = 1e-6):
        super().__init__()
        dim, heads = _check_sizes(dim, heads)
        if causal:
            raise ValueError("causal=True is not available: the symmetric energy's gradient uses future tokens")
        eps = check_positive("eps", eps, allow_zero=True, scalar=True)
        self.dim, self.heads, self.rms, self.eps = dim, heads, bool(rms), eps
        self.beta = 1 / math.sqrt(dim // heads) if beta is None else check_positive("beta", beta, scalar=True)
        self.weight = nn.Parameter(torch.randn(dim, dim) / math.sqrt(dim))  # W = [W_1 ... W_H], (d, H·d_h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.dim)
        return type(self).update(x, self.weight, self.heads, self.beta, self.rms, self.eps, validate=False)


class BiSoftmaxAttention(_HypersphericalAttention):
    __doc__ = ("Hyper-SET's symmetric bi-softmax attention −Σ_h W_h Zʰ(softmax_col + softmax_row)(β ZʰᵀZʰ) "
               "(paper 004, eq. 9).\n\n    " + _HypersphericalAttention.__doc__)
    update = staticmethod(hs.hyperset_attention_update)


class SigmoidAttention(_HypersphericalAttention):
    __doc__ = ("Sigmoid attention −Σ_h W_h Zʰ σ'(β ZʰᵀZʰ) (paper 004, Table 18).\n\n    "
               + _HypersphericalAttention.__doc__)
    update = staticmethod(hs.sigmoid_attention_update)


class KernelLinearAttention(_HypersphericalAttention):
    __doc__ = ("Kernel linear attention −Σ_h W_h Φ'(Zʰ) ⊙ βΦ(Zʰ)Φ(Zʰ)ᵀΦ(Zʰ), Φ = σ, cost O(N d_h d) "
               "(paper 004, Table 18).\n\n    " + _HypersphericalAttention.__doc__)
    update = staticmethod(hs.kernel_linear_attention_update)


class _EnergyFeedforward(nn.Module):
    """A feedforward layer = −∇ of an alignment energy with dictionary D (d, M) (paper 004, eq. 11 / Table 19).

    Args: dim d, hidden M (None: 4d, the paper's MLP ratio), rms (RMS-normalise Dᵀx onto the √M sphere),
    eps. Parameters: d·M (D is used twice, tied).
    """

    update = None

    def __init__(self, dim: int, hidden: int | None = None, rms: bool = True, eps: float = 1e-6):
        super().__init__()
        dim, _ = _check_sizes(dim)
        hidden = 4 * dim if hidden is None else check_int("hidden", hidden, minimum=1)
        eps = check_positive("eps", eps, allow_zero=True, scalar=True)
        self.dim, self.hidden, self.rms, self.eps = dim, hidden, bool(rms), eps
        self.weight = nn.Parameter(torch.randn(dim, hidden) / math.sqrt(dim))  # D = [d_1 ... d_M]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.dim)
        return type(self).update(x, self.weight, self.rms, self.eps, validate=False)


class ReLUEnergyFeedforward(_EnergyFeedforward):
    __doc__ = "D ReLU(RMSNorm(Dᵀx)) (paper 004, eq. 11).\n\n    " + _EnergyFeedforward.__doc__
    update = staticmethod(hs.hyperset_feedforward_update)


class SoftmaxEnergyFeedforward(_EnergyFeedforward):
    __doc__ = "D softmax(RMSNorm(Dᵀx)) (paper 004, Table 19).\n\n    " + _EnergyFeedforward.__doc__
    update = staticmethod(hs.softmax_feedforward_update)


class GatedEnergyFeedforward(_EnergyFeedforward):
    __doc__ = "D[(Σ_m σ(u_m)) σ'(u)], u = RMSNorm(Dᵀx) (paper 004, Table 19).\n\n    " + _EnergyFeedforward.__doc__
    update = staticmethod(hs.gated_feedforward_update)
