"""Full models built from energylab.layers: one module per model family; :func:`count_parameters` and
:func:`matmul_flops` for all.

``energylab.models.HyperSET`` (the Hyper-SET image classifier of :mod:`energylab.models.hyperset`) is imported on
first use, so that importing this package imports no model family."""
from __future__ import annotations

import torch
from torch import nn


def count_parameters(module: nn.Module) -> int:
    """Number of trainable scalars (shared tensors counted once)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def matmul_flops(module: nn.Module, *args, **kwargs) -> int:
    """Floating-point operations of the matrix products in one forward ``module(*args, **kwargs)``, without
    gradients: torch's FlopCounterMode (2 per multiply-add), with every layer on its reference path and softmax
    attention on SDPA's math path, whose products the counter sees (its fused CPU kernel it does not). Elementwise
    work (softmax, norms, a Kuramoto step's rotations) is not counted: the book's measure of work per input, the same
    for every layer and device."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from energylab import kernels

    with kernels.reference_paths(), sdpa_kernel(SDPBackend.MATH), torch.no_grad(), \
            FlopCounterMode(display=False) as counter:
        module(*args, **kwargs)
    return int(counter.get_total_flops())


def __getattr__(name: str):
    if name == "HyperSET":
        from energylab.models.hyperset import HyperSET

        return HyperSET
    raise AttributeError(f"module 'energylab.models' has no attribute {name!r}")
