"""Energies written for :func:`energylab.derive`, and looped Sudoku blocks for every trainable form.

Energies (``nn.Module`` with ``energy(x)``, x (B, N, d) -> (B,), and their hand-derived ``closed_form(x)``):

- :class:`SoftmaxSelfEnergy`: E = −Σ_h (1/β) Σ_n log Σ_m exp(β q_{h,n}ᵀ k_{h,m}), q = W_Q x, k = W_K x of the
  same tokens (the multi-head free energy of paper 000 with the tokens as their own keys). Its gradient has the
  usual query term W_Qᵀ Σ_m p_nm k_m and a key term W_Kᵀ Σ_m p_mn q_m that a standard attention layer drops.
- :class:`CauchyEnergy`: the same free energy with the Gaussian kernel exp(−‖q − k‖²/2) replaced by the heavy-tailed
  Cauchy (Student-t, one degree of freedom) kernel (1 + ‖q − k‖²)⁻¹: E = −Σ_h Σ_n log Σ_m (1 + ‖q_{h,n} −
  k_{h,m}‖²)⁻¹. Our own energy (no paper): far keys keep a polynomial, not an exponentially small, weight.

Looped blocks (``builder(dim, heads, ffn_mult)``, ``forward(x, c)``, registered into
:data:`energylab.layers.registry.LAYERS` when this module is imported), each the one pre-norm block
(:class:`energylab.layers.block.PreNormBlock`):

    h = x + c;  h = h + A(RMSNorm(h));  x' = h + F(RMSNorm(h))

with A one attention layer of :mod:`energylab.layers` or a derived layer's update, F the GELU MLP of the
Transformer block or an energy feedforward of :mod:`energylab.layers`. Names: ``form-<attention>`` (with the
MLP), ``form-<feedforward>`` (with softmax MHA) and ``derived-<energy>`` (autograd attention, with the MLP).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from energylab.layers import hyperspherical as hs
from energylab.layers.block import MLP, PreNormBlock
from energylab.layers.energy import derive
from energylab.layers.expressive import ExpressiveAttention
from energylab.layers.free_energy import MultiHeadAttention
from energylab.layers.newton import MHA2nd1st
from energylab.layers.registry import register_layer

__all__ = ["SoftmaxSelfEnergy", "CauchyEnergy", "DerivedAttention", "ATTENTIONS", "FEEDFORWARDS", "ENERGIES",
           "LAYER_NAMES"]


def _projections(dim: int, heads: int, generator=None):
    """W_Q, W_K: (H, d_h, d), entries N(0, 1/d)."""
    if dim % heads:
        raise ValueError(f"dim ({dim}) must be divisible by heads ({heads})")
    return [nn.Parameter(torch.randn(heads, dim // heads, dim, generator=generator) / math.sqrt(dim))
            for _ in range(2)]


def _heads(W: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """(H, d_h, d) maps of (B, N, d) tokens -> (B, H, N, d_h)."""
    return torch.einsum("hca,bna->bhnc", W, x)


def _back(W: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Σ_h W_hᵀ g_h: (H, d_h, d), (B, H, N, d_h) -> (B, N, d)."""
    return torch.einsum("hca,bhnc->bna", W, g)


class SoftmaxSelfEnergy(nn.Module):
    """E(x) = −Σ_h (1/β) Σ_n logsumexp_m(β q_{h,n}ᵀ k_{h,m}), β = 1/√d_h: x (B, N, d) -> (B,)."""

    def __init__(self, dim: int, heads: int = 1, generator=None):
        super().__init__()
        self.Wq, self.Wk = _projections(dim, heads, generator)
        self.beta = 1 / math.sqrt(dim // heads)

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        scores = _heads(self.Wq, x) @ _heads(self.Wk, x).transpose(-1, -2)  # (B, H, N, N)
        return -torch.logsumexp(self.beta * scores, -1).sum((-1, -2)) / self.beta

    def closed_form(self, x: torch.Tensor) -> torch.Tensor:
        """−∇E = Σ_h W_{Q,h}ᵀ Σ_m p_nm k_m + W_{K,h}ᵀ Σ_m p_mn q_m, p = softmax_m(β qᵀk)."""
        q, k = _heads(self.Wq, x), _heads(self.Wk, x)
        p = torch.softmax(self.beta * q @ k.transpose(-1, -2), -1)  # (B, H, N, N): row n over keys m
        return _back(self.Wq, p @ k) + _back(self.Wk, p.transpose(-1, -2) @ q)


class CauchyEnergy(nn.Module):
    """E(x) = −Σ_h Σ_n log Σ_m (1 + ‖q_{h,n} − k_{h,m}‖²)⁻¹: x (B, N, d) -> (B,)."""

    def __init__(self, dim: int, heads: int = 1, generator=None):
        super().__init__()
        self.Wq, self.Wk = _projections(dim, heads, generator)

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        q, k = _heads(self.Wq, x), _heads(self.Wk, x)
        dist = (q.unsqueeze(-2) - k.unsqueeze(-3)).pow(2).sum(-1)  # (B, H, N, N): ‖q_n − k_m‖²
        return -torch.log((1 + dist).reciprocal().sum(-1)).sum((-1, -2))

    def closed_form(self, x: torch.Tensor) -> torch.Tensor:
        """−∇E, by hand: w_nm = (1 + ‖q_n − k_m‖²)⁻¹, a_nm = w_nm² / Σ_m' w_nm' (a Cauchy "attention" matrix whose
        rows sum to less than 1); −∂E/∂q_n = −2 Σ_m a_nm (q_n − k_m), −∂E/∂k_m = 2 Σ_n a_nm (q_n − k_m)."""
        q, k = _heads(self.Wq, x), _heads(self.Wk, x)
        w = (1 + (q.unsqueeze(-2) - k.unsqueeze(-3)).pow(2).sum(-1)).reciprocal()  # (B, H, N, N)
        a = w.pow(2) / w.sum(-1, keepdim=True)
        row = a.sum(-1, keepdim=True)  # Σ_m a_nm
        col = a.sum(-2).unsqueeze(-1)  # Σ_n a_nm
        gq = -2 * (row * q - a @ k)  # −2 Σ_m a_nm (q_n − k_m)
        gk = 2 * (a.transpose(-1, -2) @ q - col * k)  # 2 Σ_n a_nm (q_n − k_m)
        return _back(self.Wq, gq) + _back(self.Wk, gk)


ENERGIES = {"softmax": SoftmaxSelfEnergy, "cauchy": CauchyEnergy}


class DerivedAttention(nn.Module):
    """A derived layer's update η·u(x) as an attention sublayer (the block adds the residual); η is learned
    (initial ``step``). ``self.layer`` is the :class:`~energylab.layers.energy.EnergyLayer`."""

    def __init__(self, energy: nn.Module, step: float = 0.5):
        super().__init__()
        self.layer = derive(energy, step=step, learn_step=True)

    def forward(self, x):
        return self.layer.step.to(x.dtype) * self.layer.update(x)


# name -> attention(dim, heads); every layer attends to all tokens (a board has no order: causal=False)
ATTENTIONS = {
    "mha": lambda d, h: MultiHeadAttention(d, h, causal=False),
    "ea": lambda d, h: ExpressiveAttention(d, h, causal=False),
    "mha2nd1st": lambda d, h: MHA2nd1st(d, h, causal=False),
    "bisoftmax": lambda d, h: hs.BiSoftmaxAttention(d, h),
    "sigmoid": lambda d, h: hs.SigmoidAttention(d, h),
    "kernel_linear": lambda d, h: hs.KernelLinearAttention(d, h),
}
# name -> feedforward(dim, ffn_mult), paired with softmax MHA
FEEDFORWARDS = {
    "relu_ff": lambda d, m: hs.ReLUEnergyFeedforward(d, m * d),
    "softmax_ff": lambda d, m: hs.SoftmaxEnergyFeedforward(d, m * d),
    "gated_ff": lambda d, m: hs.GatedEnergyFeedforward(d, m * d),
}


LAYER_NAMES = (*(f"form-{n}" for n in (*ATTENTIONS, *FEEDFORWARDS)), *(f"derived-{n}" for n in ENERGIES))


def _register() -> None:
    for name, attention in ATTENTIONS.items():
        register_layer(f"form-{name}", lambda d, h, m, a=attention: PreNormBlock(a(d, h), MLP(d, m), d))
    for name, feedforward in FEEDFORWARDS.items():
        register_layer(f"form-{name}", lambda d, h, m, f=feedforward: PreNormBlock(ATTENTIONS["mha"](d, h), f(d, m), d))
    for name, energy in ENERGIES.items():
        register_layer(f"derived-{name}",
                       lambda d, h, m, e=energy: PreNormBlock(DerivedAttention(e(d, h)), MLP(d, m), d))


_register()
