"""The hyperspherical energies' layers (paper 004; :mod:`energylab.forms.hyperspherical`): bi-softmax, sigmoid
and kernel-linear attention at RMS-normalised projections, and the three energy feedforwards.

Every layer maps x (B, N, d) -> (B, N, d) and returns its update without the residual (see
:mod:`energylab.layers`)."""
from __future__ import annotations

import math

import torch
from torch import nn

from energylab import catalog, kernels
from energylab._checks import (
    check_int,
    check_positive,
)
from energylab.forms import hyperspherical as hs
from energylab.forms._common import merge_heads
from energylab.kernels import attention as fa
from energylab.kernels import fused_attention as fz
from energylab.layers._common import check_input, check_sizes

__all__ = ["BiSoftmaxAttention", "SigmoidAttention", "KernelLinearAttention", "ReLUEnergyFeedforward",
           "SoftmaxEnergyFeedforward", "GatedEnergyFeedforward"]


class _HypersphericalAttention(nn.Module):
    """One weight W (H, d_h, d) plays query, key and value (paper 004); forward returns −∇E at RMS-normalised
    projections through its operator of :mod:`energylab.forms.hyperspherical`. No causal version: the symmetric
    energies couple every pair of tokens both ways (causal=True raises).

    Args (every subclass): dim, heads, causal (must be False), beta (None: 1/√d_h), rms (evaluate at z normalised
    onto the √d_h sphere), eps (RMSNorm epsilon). Parameters: d².
    """

    def __init__(self, dim: int, heads: int, causal: bool = False, beta: float | None = None,
                 rms: bool = True, eps: float = 1e-6):
        super().__init__()
        dim, heads = check_sizes(dim, heads)
        if causal:
            raise ValueError("causal=True is not available: the symmetric energy's gradient uses future tokens")
        eps = check_positive("eps", eps, allow_zero=True, scalar=True)
        self.dim, self.heads, self.rms, self.eps = dim, heads, bool(rms), eps
        self.beta = 1 / math.sqrt(dim // heads) if beta is None else check_positive("beta", beta, scalar=True)
        self.weight = nn.Parameter(torch.randn(heads, dim // heads, dim) / math.sqrt(dim))  # W: (H, d_h, d)

    _kernel = None  # a tiled kernel of :mod:`energylab.kernels.attention` on Z (B·H, N, d_h), if the form has one
    _fused = _fused_path = None  # its C tile loop (:mod:`energylab.kernels.fused_attention`, on Z (B, H, N, d_h))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(x, self.dim, self.weight)
        if self._kernel is None or not kernels.tiled(x) or (self.rms and self.eps == 0):
            return self._update(x, self.weight, self.beta, self.rms, self.eps)  # the checked catalog operator
        Z = hs.head_projections(x, self.weight)  # (B, H, N, d_h), a view of the (B, N, d) projection
        if self._fused is not None and fz.usable(Z, self._fused_path):  # the tile loop in C (issue 55)
            Y = self._fused(Z, self.beta, self.eps if self.rms else None)  # normalised inside; Y in Z's layout
        else:
            Z = hs.rms_normalize(Z, self.eps) if self.rms else Z
            Y = self._kernel(Z.flatten(0, 1), self.beta).view_as(Z)  # the same numbers as the operator, tiled
        return -(merge_heads(Y) @ self.weight.flatten(0, 1))  # −Σ_h y_iʰ W_h


class BiSoftmaxAttention(_HypersphericalAttention):
    """Hyper-SET's symmetric bi-softmax attention −Σ_h W_h Zʰ(softmax_col + softmax_row)(β ZʰᵀZʰ) (paper 004, eq. 9)."""

    _update = staticmethod(hs.hyperset_attention_update)
    _kernel = staticmethod(fa.bisoftmax_attention)
    _fused, _fused_path = staticmethod(fz.bisoftmax), "fused-bisoftmax"


class SigmoidAttention(_HypersphericalAttention):
    """Sigmoid attention −Σ_h W_h Zʰ σ'(β ZʰᵀZʰ) (paper 004, Table 18)."""

    _update = staticmethod(hs.sigmoid_attention_update)
    _kernel = staticmethod(fa.sigmoid_attention)
    _fused, _fused_path = staticmethod(fz.sigmoid), "fused-sigmoid"


class KernelLinearAttention(_HypersphericalAttention):
    """Kernel linear attention −Σ_h W_h Φ'(Zʰ) ⊙ βΦ(Zʰ)Φ(Zʰ)ᵀΦ(Zʰ), Φ = σ, cost O(N d_h d) (paper 004, Table 18)."""

    _update = staticmethod(hs.kernel_linear_attention_update)


class _EnergyFeedforward(nn.Module):
    """A feedforward layer = −∇ of an alignment energy with dictionary D (d, M), through its operator of
    :mod:`energylab.forms.hyperspherical` (paper 004, eq. 11 / Table 19)."""

    def __init__(self, dim: int, hidden: int | None = None, rms: bool = True, eps: float = 1e-6):
        super().__init__()
        dim, _ = check_sizes(dim)
        hidden = 4 * dim if hidden is None else check_int("hidden", hidden, minimum=1)
        eps = check_positive("eps", eps, allow_zero=True, scalar=True)
        self.dim, self.hidden, self.rms, self.eps = dim, hidden, bool(rms), eps
        self.weight = nn.Parameter(torch.randn(dim, hidden) / math.sqrt(dim))  # D = [d_1 ... d_M]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(x, self.dim, self.weight)
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


catalog.register_layer(BiSoftmaxAttention, "hyperset_attention",
                       "the update at RMS-normalised projections")
catalog.register_layer(SigmoidAttention, "sigmoid_attention",
                       "the update at RMS-normalised projections")
catalog.register_layer(KernelLinearAttention, "kernel_linear_attention",
                       "the update at RMS-normalised projections")
catalog.register_layer(ReLUEnergyFeedforward, "hyperset_feedforward",
                       "the update at RMS-normalised Dᵀx")
catalog.register_layer(SoftmaxEnergyFeedforward, "softmax_feedforward",
                       "the update at RMS-normalised Dᵀx")
catalog.register_layer(GatedEnergyFeedforward, "gated_feedforward",
                       "the update at RMS-normalised Dᵀx")
