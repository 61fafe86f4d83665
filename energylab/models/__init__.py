"""Full models built from energylab.modules: one module per model family; :func:`count_parameters` for all."""
from __future__ import annotations

from torch import nn


def count_parameters(module: nn.Module) -> int:
    """Number of trainable scalars (shared tensors counted once)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
