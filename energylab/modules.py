"""nn.Module layers built on the catalog's operators, for training.

Every layer maps x (B, N, d) -> (B, N, d) and returns the attention (or feedforward) *update* WITHOUT the
residual: the model adds x (and any step size) itself. Layers are device- and dtype-agnostic (float32,
bfloat16, float64); the causal flag masks future tokens (True where attention is allowed: j ≤ i).
Heads: H, d_h = d / H; multi-head weights are (H, d_h, d) (book/notation.md): the rows h·d_h, ..., (h+1)·d_h − 1
of an ``nn.Linear`` weight (d, d) are head h's map. Each layer's test checks it against its operator in
:mod:`energylab.forms` on small float64 inputs.

Fast kernels. A layer calls the checked public operator of its family whenever that costs nothing (the Hyper-SET
feedforward layers call the operators of :mod:`energylab.forms.hyperspherical` directly: their checks are O(N d)
against O(N² d) of work, and checks on tensor contents switch off under torch.compile and torch.func). The
expressive, bi-softmax, sigmoid and Newton (MHA2nd1st) layers hand their work to the tiled kernels of
:mod:`energylab.kernels.attention` when :func:`energylab.kernels.enabled` says so (one switch for every layer:
``with kernels.reference_paths():`` turns them off), which keep no (N, N) tensor for the backward pass (issue 19);
otherwise, and under torch.func transforms, where those autograd Functions cannot go, they compute the math on the
page: the catalog operator, or for MHA2nd1st the row-blocked
:func:`energylab.forms.newton.newton_first_order_direction`.
No layer imports a private name of another module.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from energylab import catalog, kernels
from energylab._checks import (
    check_count,
    check_dim,
    check_divides,
    check_int,
    check_positive,
    check_same_dtype,
    check_tensor,
    value_checks_off,
)
from energylab.forms import hyperspherical as hs
from energylab.forms._common import mask_rows, merge_heads, row_blocks, split_heads
from energylab.forms.expressive import expressive_weights
from energylab.forms.newton import newton_first_order_direction, ridge_inverse
from energylab.kernels import attention as fa

__all__ = [
    "MultiHeadAttention",
    "ExpressiveAttention",
    "MHA2nd1st",
    "MHA2nd1stCorrected",
    "BiSoftmaxAttention",
    "SigmoidAttention",
    "KernelLinearAttention",
    "ReLUEnergyFeedforward",
    "SoftmaxEnergyFeedforward",
    "GatedEnergyFeedforward",
]


def _check_input(x, dim: int, weight: torch.Tensor) -> None:
    """x must be (B, N ≥ 1, dim) in the dtype of the layer's ``weight`` (autocast aside); finiteness is checked
    eagerly only (check_tensor skips it under torch.compile)."""
    check_tensor("x", x, ndim=3)
    check_count("x", x, 1)
    check_dim("x", x.shape[-1], dim)
    check_same_dtype(("the layer's parameters", weight), ("x", x))


def _check_sizes(dim, heads=None) -> tuple[int, int | None]:
    """dim a positive int and, if given, heads a positive int dividing it; returned as ints."""
    dim = check_int("dim", dim, minimum=1)
    return dim, None if heads is None else check_divides("heads", heads, dim)


def _causal_mask(n: int, device) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()  # (N, N): True where j ≤ i


class _QKVAttention(nn.Module):
    """Shared projections of the standard layers: W_Q, W_K, W_V, W_O (no bias, as in paper 000 eq. 11)."""

    def __init__(self, dim: int, heads: int, causal: bool):
        super().__init__()
        dim, heads = _check_sizes(dim, heads)
        self.dim, self.heads, self.causal = dim, heads, bool(causal)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)  # [W_Q; W_K; W_V]
        self.out = nn.Linear(dim, dim, bias=False)  # W_O = [W_{O,1} ... W_{O,H}] (d, H·d_h): W_Oᵀ is (H, d_h, d)

    def _qkv(self, x):
        _check_input(x, self.dim, self.qkv.weight)
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # each (B, N, d)
        return split_heads(q, self.heads), split_heads(k, self.heads), split_heads(v, self.heads)


class MultiHeadAttention(_QKVAttention):
    """Standard MHA, Σ_h W_{O,h} Σ_j softmax_j(q_hᵀk_{j,h}/√d_h) v_{j,h} (paper 000 eq. 11 minus the residual).

    One gradient step on the multi-head free energy (Theorem 2). Uses F.scaled_dot_product_attention.
    Args: dim d, heads H (must divide d), causal (mask j > i). Parameters: 4d².
    """

    def __init__(self, dim: int, heads: int, causal: bool = True):
        super().__init__(dim, heads, causal)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._qkv(x)  # (B, H, N, d_h)
        with kernels.softmax_attention_backend(q):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.out(merge_heads(y))

    def weights(self, x: torch.Tensor) -> torch.Tensor:
        """The attention weights softmax_j(q_hᵀk_{j,h}/√d_h) that :meth:`forward` applies, masked when causal:
        (B, N, d) -> (B, H, N_query, N_key), rows summing to one."""
        q, k, _ = self._qkv(x)
        s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
        if self.causal:
            s = s.masked_fill(~_causal_mask(x.shape[1], x.device), float("-inf"))
        return torch.softmax(s, dim=-1)


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
        if kernels.enabled():  # flex attention on CUDA, the tiled kernel on the CPU: no (N, N) tensor kept
            y = fa.expressive_heads(q, k, v, self.causal, self.scale)
            if y is not None:
                return self.out(merge_heads(y))
        mask = _causal_mask(x.shape[1], x.device) if self.causal else None
        return self.out(merge_heads(expressive_weights((q * self.scale) @ k.transpose(-1, -2), mask) @ v))


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
        self.out = nn.Linear(dim, dim, bias=False)  # W_O = [W_{O,1} ... W_{O,H}] (d, H·d_h): W_Oᵀ is (H, d_h, d)
        self.log_temperature = nn.Parameter(torch.full((heads,), math.log(d_h)))  # log T_h
        self.log_temperature_b = nn.Parameter(torch.full((heads,), math.log(d_h)))  # log T'_h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.dim, self.query.weight)
        q = split_heads(self.query(x), self.heads)  # (B, H, N, d_h)
        k = split_heads(self.key(x), self.heads)
        if q.dtype == torch.float16:  # b_h is cubic in q, k: float16 (largest 65504) overflows to NaN at modest scales
            return self.out(self._direction_in_float32(q, k, x))
        T = self.log_temperature.exp().to(x.dtype).view(-1, 1, 1)  # (H, 1, 1)
        T_b = self.log_temperature_b.exp().to(x.dtype).view(-1, 1, 1)
        mask = _causal_mask(x.shape[1], x.device) if self.causal else None
        G, G_inv = self._metric()
        return self.out(self._direction(q, k, T, T_b, G, G_inv, mask))

    def _direction_in_float32(self, q, k, x):
        """The merged direction (B, N, d) of float16 projections, computed in float32 and returned in float16; a
        direction beyond float16's range raises ValueError (it would be inf, then NaN, after W_O)."""
        T = self.log_temperature.float().exp().view(-1, 1, 1)
        T_b = self.log_temperature_b.float().exp().view(-1, 1, 1)
        mask = _causal_mask(x.shape[1], x.device) if self.causal else None
        G, G_inv = self._metric(torch.float32)
        direction = self._direction(q.float(), k.float(), T, T_b, G, G_inv, mask)
        largest = torch.finfo(torch.float16).max
        if not value_checks_off() and bool(direction.detach().abs().amax() > largest):
            raise ValueError(f"x: {type(self).__name__}'s direction (q − k̄) + b reaches "
                             f"{float(direction.detach().abs().amax()):.3g} here, beyond float16's largest value "
                             f"{largest:g}; run the layer in float32, float64 or bfloat16")
        return direction.to(q.dtype)

    def _direction(self, q, k, T, T_b, G, G_inv, mask):
        """The merged direction (B, N, d) from the heads' q, k (B, H, N, d_h): the tiled kernel on the CPU
        (no (N, N) tensor kept for the backward pass), else cache-sized query blocks of the reference ops."""
        if kernels.tiled(q):
            return merge_heads(self._fast(q, k, T, T_b, G, G_inv, mask))
        k_t = k.transpose(-1, -2)  # (B, H, d_h, N)
        blocks = []
        for rows in row_blocks(q.shape[-2], k.shape[-2], q.shape[0] * q.shape[1]):  # cache-sized query blocks
            logits = q[..., rows, :] @ k_t / T  # (B, H, n, N): q_hᵀk_{j,h} / T_h
            block_mask = mask_rows(mask, rows)
            if block_mask is not None:
                logits = logits.masked_fill(~block_mask, float("-inf"))  # causal: no row is fully masked
            weights = torch.softmax(logits, dim=-1)  # p_{j,h}
            blocks.append(newton_first_order_direction(q[..., rows, :], k, weights, G, T_b, self.ridge, G_inv))
        direction = torch.cat(blocks, dim=-2)  # (B, H, N, d_h)
        return merge_heads(direction)

    @staticmethod
    def _fast(q, k, T, T_b, G, G_inv, mask):
        """:func:`energylab.kernels.attention.newton_direction` on (B·H, N, d_h), per-head T, G broadcast over B."""
        per_head = lambda t: None if t is None else t.to(q.dtype).expand(q.shape[0], *t.shape).flatten(0, 1)  # noqa: E731
        y = fa.newton_direction(q.flatten(0, 1), k.flatten(0, 1), per_head(T), per_head(T_b), per_head(G),
                                per_head(G_inv), mask)
        return y.view_as(q)

    def _metric(self, dtype: torch.dtype | None = None):
        """G_h = W_{Q,h}W_{Q,h}ᵀ (H, d_h, d_h) and (G_h + ridge·I)⁻¹: the paper's b_h uses both (in ``dtype``,
        None: the weight's)."""
        W_q = self.query.weight.unflatten(0, (self.heads, -1))  # (H, d_h, d): W_{Q,h}
        W_q = W_q if dtype is None else W_q.to(dtype)
        G = W_q @ W_q.transpose(-1, -2)
        return G, ridge_inverse(G, self.ridge)


class MHA2nd1stCorrected(MHA2nd1st):
    """MHA2nd1st built on the exact Newton step (ours): W_O[(q − k̄) + b], b_h = (1/T'_h) cov_h (q_h − k̄_h).

    cov_h = Σ_j p_{j,h} k_{j,h}k_{j,h}ᵀ − k̄_h k̄_hᵀ. The exact per-head Newton direction of the multi-head free
    energy is −WᵀG⁻¹C⁻¹(q − k̄) with W the stacked W_{Q,h} and G = WWᵀ (:func:`energylab.forms.newton.mha2nd_update`);
    its first Taylor term puts no G_h inside b_h, and the one d × d map −WᵀG⁻¹ is absorbed into the learned W_O.
    So: no G_h, no solve, no ridge. Same parameters as :class:`MHA2nd1st`. Args: dim, heads, causal.
    """

    def __init__(self, dim: int, heads: int, causal: bool = True):
        super().__init__(dim, heads, causal, ridge=0.0)

    def _metric(self, dtype: torch.dtype | None = None):
        return None, None


class _HypersphericalAttention(nn.Module):
    """One weight W (H, d_h, d) plays query, key and value (paper 004); forward returns −∇E at RMS-normalised
    projections through its operator of :mod:`energylab.forms.hyperspherical`. No causal version: the symmetric
    energies couple every pair of tokens both ways (causal=True raises)."""

    def __init__(self, dim: int, heads: int, causal: bool = False, beta: float | None = None,
                 rms: bool = True, eps: float = 1e-6):
        super().__init__()
        dim, heads = _check_sizes(dim, heads)
        if causal:
            raise ValueError("causal=True is not available: the symmetric energy's gradient uses future tokens")
        eps = check_positive("eps", eps, allow_zero=True, scalar=True)
        self.dim, self.heads, self.rms, self.eps = dim, heads, bool(rms), eps
        self.beta = 1 / math.sqrt(dim // heads) if beta is None else check_positive("beta", beta, scalar=True)
        self.weight = nn.Parameter(torch.randn(heads, dim // heads, dim) / math.sqrt(dim))  # W: (H, d_h, d)

    _kernel = None  # a tiled kernel of :mod:`energylab.kernels.attention` on Z (B·H, N, d_h), if the form has one

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.dim, self.weight)
        if self._kernel is None or not kernels.tiled(x) or (self.rms and self.eps == 0):
            return self._update(x, self.weight, self.beta, self.rms, self.eps)  # the checked catalog operator
        Z = hs.head_projections(x, self.weight)  # (B, H, N, d_h)
        Z = hs.rms_normalize(Z, self.eps) if self.rms else Z
        Y = self._kernel(Z.flatten(0, 1), self.beta).view_as(Z)  # the same numbers as the operator, tiled
        return -(merge_heads(Y) @ self.weight.flatten(0, 1))  # −Σ_h y_iʰ W_h


class BiSoftmaxAttention(_HypersphericalAttention):
    """Hyper-SET's symmetric bi-softmax attention −Σ_h W_h Zʰ(softmax_col + softmax_row)(β ZʰᵀZʰ) (paper 004, eq. 9).

    Args: dim, heads, causal (must be False: the gradient of a symmetric energy uses future tokens), beta (None:
    1/√d_h), rms (evaluate at z normalised onto the √d_h sphere), eps (RMSNorm epsilon).
    One W (H, d_h, d) plays query, key and value. Parameters: d².
    """

    _update = staticmethod(hs.hyperset_attention_update)
    _kernel = staticmethod(fa.bisoftmax_attention)


class SigmoidAttention(_HypersphericalAttention):
    """Sigmoid attention −Σ_h W_h Zʰ σ'(β ZʰᵀZʰ) (paper 004, Table 18).

    Args: dim, heads, causal (must be False: the gradient of a symmetric energy uses future tokens), beta (None:
    1/√d_h), rms (evaluate at z normalised onto the √d_h sphere), eps (RMSNorm epsilon).
    One W (H, d_h, d) plays query, key and value. Parameters: d².
    """

    _update = staticmethod(hs.sigmoid_attention_update)
    _kernel = staticmethod(fa.sigmoid_attention)


class KernelLinearAttention(_HypersphericalAttention):
    """Kernel linear attention −Σ_h W_h Φ'(Zʰ) ⊙ βΦ(Zʰ)Φ(Zʰ)ᵀΦ(Zʰ), Φ = σ, cost O(N d_h d) (paper 004, Table 18).

    Args: dim, heads, causal (must be False: the gradient of a symmetric energy uses future tokens), beta (None:
    1/√d_h), rms (evaluate at z normalised onto the √d_h sphere), eps (RMSNorm epsilon).
    One W (H, d_h, d) plays query, key and value. Parameters: d².
    """

    _update = staticmethod(hs.kernel_linear_attention_update)


class _EnergyFeedforward(nn.Module):
    """A feedforward layer = −∇ of an alignment energy with dictionary D (d, M), through its operator of
    :mod:`energylab.forms.hyperspherical` (paper 004, eq. 11 / Table 19)."""

    def __init__(self, dim: int, hidden: int | None = None, rms: bool = True, eps: float = 1e-6):
        super().__init__()
        dim, _ = _check_sizes(dim)
        hidden = 4 * dim if hidden is None else check_int("hidden", hidden, minimum=1)
        eps = check_positive("eps", eps, allow_zero=True, scalar=True)
        self.dim, self.hidden, self.rms, self.eps = dim, hidden, bool(rms), eps
        self.weight = nn.Parameter(torch.randn(dim, hidden) / math.sqrt(dim))  # D = [d_1 ... d_M]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.dim, self.weight)
        return self._update(x, self.weight, self.rms, self.eps)


class ReLUEnergyFeedforward(_EnergyFeedforward):
    """D ReLU(RMSNorm(Dᵀx)) (paper 004, eq. 11): −∇ of the alignment energy with dictionary D (d, M).

    Args: dim d, hidden M (None: 4d, the paper's MLP ratio), rms (RMS-normalise Dᵀx onto the √M sphere),
    eps. Parameters: d·M (D is used twice, tied).
    """

    _update = staticmethod(hs.hyperset_feedforward_update)


class SoftmaxEnergyFeedforward(_EnergyFeedforward):
    """D softmax(RMSNorm(Dᵀx)) (paper 004, Table 19): −∇ of the alignment energy with dictionary D (d, M).

    Args: dim d, hidden M (None: 4d, the paper's MLP ratio), rms (RMS-normalise Dᵀx onto the √M sphere),
    eps. Parameters: d·M (D is used twice, tied).
    """

    _update = staticmethod(hs.softmax_feedforward_update)


class GatedEnergyFeedforward(_EnergyFeedforward):
    """D[(Σ_m σ(u_m)) σ'(u)], u = RMSNorm(Dᵀx) (paper 004, Table 19): −∇ of the alignment energy with D (d, M).

    Args: dim d, hidden M (None: 4d, the paper's MLP ratio), rms (RMS-normalise Dᵀx onto the √M sphere),
    eps. Parameters: d·M (D is used twice, tied).
    """

    _update = staticmethod(hs.gated_feedforward_update)


# ----------------------------------------------------------------------------- the layers in the catalog
# Each trainable layer beside the form it is built on and how it relates to the form's operator (the Atlas's
# layer table, in this order; `AttentionForm.layers` reads them back).
for _cls, _form, _relation in (
    (MultiHeadAttention, "multihead_free_energy",
     "one step of the form on the spheres (Theorem 2), dot-product scores, W_V and W_O learned freely"),
    (ExpressiveAttention, "expressive_attention",
     "the same Boltzmann weights p_i; the layer is Σ_i p_i W_V h_i, not the gradient"),
    (MHA2nd1st, "mha2nd1st",
     "the form with W_O learned in place of −W_{1,h}ᵀ, dot-product scores, learnable T_h, T'_h"),
    (MHA2nd1stCorrected, "mha2nd1st-corrected",
     "the form with W_O learned in place of −WᵀG⁻¹, dot-product scores, learnable T_h, T'_h"),
    (BiSoftmaxAttention, "hyperset_attention", "the update at RMS-normalised projections"),
    (SigmoidAttention, "sigmoid_attention", "the update at RMS-normalised projections"),
    (KernelLinearAttention, "kernel_linear_attention", "the update at RMS-normalised projections"),
    (ReLUEnergyFeedforward, "hyperset_feedforward", "the update at RMS-normalised Dᵀx"),
    (SoftmaxEnergyFeedforward, "softmax_feedforward", "the update at RMS-normalised Dᵀx"),
    (GatedEnergyFeedforward, "gated_feedforward", "the update at RMS-normalised Dᵀx"),
):
    catalog.register_layer(_cls, _form, _relation)
del _cls, _form, _relation
