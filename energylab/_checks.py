"""Validation helpers for public functions: one home for the ValueErrors the book promises.

Every public function of energylab validates its inputs with these, so a bad argument
fails loudly with its own name in the message instead of producing a silent NaN.
"""
from __future__ import annotations

import math

import torch


def check_tensor(name: str, x, ndim: int | tuple[int, ...] | None = None) -> torch.Tensor:
    """Require a floating tensor with finite entries (and, if given, a number of dims)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if x.dim() not in allowed:
            raise ValueError(f"{name} must have {' or '.join(map(str, allowed))} dims, got shape {tuple(x.shape)}")
    # under torch.func transforms (vmap over a seed ensemble) a value test would be data-dependent control flow
    if not _functorch_active() and not torch.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or inf")
    return x


def _functorch_active() -> bool:
    active = getattr(torch._C, "_are_functorch_transforms_active", None)
    return bool(active and active())


def check_positive(name: str, value) -> None:
    """Require a finite, strictly positive scalar (a temperature, a step size, an inverse temperature)."""
    v = float(value.detach()) if isinstance(value, torch.Tensor) and value.numel() == 1 else value
    if isinstance(v, torch.Tensor):
        if not (torch.isfinite(v).all() and (v > 0).all()):
            raise ValueError(f"{name} must be finite and > 0 everywhere")
        return
    if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def check_dim(name: str, actual: int, expected: int, what: str = "last dimension") -> None:
    """Require matching sizes, naming the argument and both sizes."""
    if actual != expected:
        raise ValueError(f"{name}: {what} must be {expected}, got {actual}")


def check_divides(name: str, heads: int, dim: int) -> None:
    """Require the number of heads to divide the model dimension."""
    if not isinstance(heads, int) or heads < 1:
        raise ValueError(f"{name} must be a positive int, got {heads!r}")
    if dim % heads:
        raise ValueError(f"{name}={heads} must divide the dimension {dim}")
