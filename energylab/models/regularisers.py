"""Regularisers of looped self-attention (paper 003, Sec. 6.2 and App. B.2): E-single, E-multi, spectral.

All take a layer (an ``nn.Module``) and return a differentiable scalar to add to the loss, ``loss + w · R``:

* ``"spectral"`` (paper 003 eq. 20, after Lewandowski et al. 2025): R = Σ_W (σ_max(W)² − 1)² + Σ_b ‖b‖⁴ over every
  weight matrix W (2-D parameter) and every bias b (a 1-D parameter whose name ends in "bias") of the layer.
  Keeps each map's largest singular value near 1, so that the Jacobian of a step (eq. 15) cannot blow up.
* ``"e-multi"`` (eq. 19; **a reconstruction**: our copy of the paper lost the formula): R = Σ_h ‖V_h − V_hᵀ‖²_F with
  V_h = W_V,h W_O,h (d × d), the condition of Prop. 4.2 that the value maps be symmetric. The paper also
  parametrises the QK products through orthogonal U matrices; we do not (the attention keeps free W_Q, W_K).
* ``"e-single"`` (App. B.2; **a reconstruction from the condition we derive for Prop. 4.1**, see
  :mod:`energylab.forms.recurrent`): per head, R = Σ_h ‖A_h − A_hᵀ‖²_F + ‖V_h − A_h‖²_F with A_h = W_Q,h W_K,hᵀ:
  zero exactly when every head is a generalised symmetric SA head (A_h symmetric, value = A_h).

The e-* regularisers need a layer with an ``msa`` attribute (:class:`~energylab.layers.recurrent.MSA`: ItrSA,
the Kuramoto layer); ``spectral`` works on any module.
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["REGULARISERS", "regulariser", "spectral_penalty", "e_multi_penalty", "e_single_penalty"]


def spectral_penalty(layer: nn.Module) -> torch.Tensor:
    """Σ_W (σ_max(W)² − 1)² + Σ_b ‖b‖⁴ over the layer's matrices and biases (eq. 20)."""
    total = torch.zeros(())
    for name, p in layer.named_parameters():
        if p.dim() == 2:
            total = total + (torch.linalg.matrix_norm(p, 2).square() - 1).square()
        elif p.dim() == 1 and name.endswith("bias"):
            total = total + p.square().sum().square()
    return total


def _blocks(layer: nn.Module):
    msa = getattr(layer, "msa", None)
    if msa is None or not hasattr(msa, "head_blocks"):
        raise ValueError(f"layer must have an msa attribute with head_blocks (ItrSA, Kuramoto), got "
                         f"{type(layer).__name__}")
    return msa.head_blocks()


def e_multi_penalty(layer: nn.Module) -> torch.Tensor:
    """Σ_h ‖V_h − V_hᵀ‖²_F, V_h = W_V,h W_O,h (eq. 19, reconstructed)."""
    _, _, wv, wo = _blocks(layer)
    values = wv @ wo  # (H, d, d)
    return (values - values.transpose(-1, -2)).square().sum()


def e_single_penalty(layer: nn.Module) -> torch.Tensor:
    """Σ_h ‖A_h − A_hᵀ‖²_F + ‖V_h − A_h‖²_F, A_h = W_Q,h W_K,hᵀ, V_h = W_V,h W_O,h (B.2, reconstructed)."""
    wq, wk, wv, wo = _blocks(layer)
    qk, values = wq @ wk.transpose(-1, -2), wv @ wo  # (H, d, d) each
    return (qk - qk.transpose(-1, -2)).square().sum() + (values - qk).square().sum()


REGULARISERS = {"spectral": spectral_penalty, "e-multi": e_multi_penalty, "e-single": e_single_penalty}


def regulariser(name: str, layer: nn.Module) -> torch.Tensor:
    """The penalty ``name`` ("none" or a key of :data:`REGULARISERS`) of ``layer``: a scalar tensor."""
    if name == "none":
        return torch.zeros(())
    if name not in REGULARISERS:
        raise ValueError(f"regulariser must be 'none' or one of {sorted(REGULARISERS)}, got {name!r}")
    return REGULARISERS[name](layer)
