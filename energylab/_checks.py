"""Validation helpers for public functions: one home for the ValueErrors the book promises.

Every public function of energylab validates its inputs with these, so a bad argument
fails loudly with its own name in the message instead of producing a silent NaN.

Numbers: wherever a float is accepted, so are ints, NumPy scalars and one-element tensors (bools and
non-numbers raise TypeError). Value checks on tensor *contents* (finiteness, zero rows, overflow) are
skipped under torch.func transforms and torch.compile, where a data-dependent raise is not allowed.
"""
from __future__ import annotations

import math
import numbers
import operator

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
    # under torch.func transforms (vmap over a seed ensemble) and torch.compile a value test would be
    # data-dependent control flow: skipped there, like every check on tensor contents
    if not value_checks_off() and not torch.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or inf")
    return x


def _functorch_active() -> bool:
    active = getattr(torch._C, "_are_functorch_transforms_active", None)
    return bool(active and active())


def value_checks_off() -> bool:
    """True under torch.func transforms and torch.compile, where checks on tensor contents are skipped."""
    return _functorch_active() or torch.compiler.is_compiling()


def check_number(name: str, value) -> float:
    """A real scalar as a Python float: int, float, a NumPy scalar or a one-element real tensor."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.dtype == torch.bool or value.is_complex():
            raise TypeError(f"{name} must be a real number, got a tensor of shape {tuple(value.shape)} "
                            f"and dtype {value.dtype}")
        return float(value.detach())
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    return float(value)


def check_positive(name: str, value, allow_zero: bool = False, scalar: bool = False):
    """Require a finite number > 0 (>= 0 with ``allow_zero``): a temperature, a step size, an inverse temperature.

    Returns the value to compute with: a Python float, or the tensor itself when a tensor was given (it may
    carry gradients, e.g. a learnable temperature) unless ``scalar`` asks for a float. Without ``scalar`` a
    tensor of several entries (one value per head) is accepted and checked entry-wise.
    """
    bound = ">= 0" if allow_zero else "> 0"
    if isinstance(value, torch.Tensor) and not (scalar and value.numel() == 1):
        if scalar or value.dtype == torch.bool or value.is_complex():
            raise TypeError(f"{name} must be a real number, got a tensor of shape {tuple(value.shape)} "
                            f"and dtype {value.dtype}")
        if value_checks_off():
            return value
        positive = (value >= 0) if allow_zero else (value > 0)
        if not (torch.isfinite(value).all() and positive.all()):
            raise ValueError(f"{name} must be finite and {bound} everywhere")
        return value
    v = check_number(name, value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
    return v


def check_int(name: str, value, minimum: int | None = None) -> int:
    """An integer as a Python int: int, a NumPy integer or a one-element integer tensor (bools refused)."""
    if isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool):
        raise TypeError(f"{name} must be an int, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {value!r} of type {type(value).__name__}") from None
    if minimum is not None and v < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {v}")
    return v


def check_count(name: str, x: torch.Tensor, axis: int, minimum: int = 1, what: str = "token", why: str = "") -> None:
    """Require at least ``minimum`` entries along ``axis`` of x (e.g. a non-empty set of tokens or keys)."""
    if x.dim() < abs(axis) or x.shape[axis] < minimum:
        plural = "s" if minimum > 1 else ""
        raise ValueError(f"{name} must hold at least {minimum} {what}{plural}, got shape {tuple(x.shape)}"
                         + (f" ({why})" if why else ""))


def check_nonzero_rows(name: str, x: torch.Tensor, norms: torch.Tensor | None = None,
                       why: str = "a zero vector has no direction on the sphere") -> None:
    """Require every row x[..., i, :] to be non-zero (``norms``: the row norms, if already computed)."""
    if value_checks_off():
        return
    norms = x.norm(dim=-1) if norms is None else norms
    zero = (norms == 0).reshape(x.shape[:-1])
    if zero.any():
        index = tuple(int(i) for i in zero.nonzero()[0])
        raise ValueError(f"{name} has a zero row at index {index}: {why}")


def check_overflow(name: str, value, result: torch.Tensor, what: str) -> None:
    """Raise a ValueError naming the inverse temperature ``name`` when ``result`` overflowed: exp(name·score) = inf.

    ``what`` is the exponential, e.g. "exp(beta⟨x_i, x_j⟩)"; the message states the dtype's safe range.
    """
    if value_checks_off() or torch.isfinite(result).all():
        return
    shown = f"{float(value):g}" if isinstance(value, (int, float)) else repr(value)
    limit = math.log(torch.finfo(result.dtype).max)
    raise ValueError(f"{name}={shown} is too large for {result.dtype}: {what} overflows; the safe range is "
                     f"{name} · (largest score) < {limit:.1f}, the log of the largest {result.dtype} "
                     f"(less the log of the number of terms summed)")


def check_dim(name: str, actual: int, expected: int, what: str = "last dimension") -> None:
    """Require matching sizes, naming the argument and both sizes."""
    if actual != expected:
        raise ValueError(f"{name}: {what} must be {expected}, got {actual}")


def check_divides(name: str, heads, dim: int) -> int:
    """Require the number of heads (a positive int) to divide the model dimension; returns it as an int."""
    heads = check_int(name, heads, minimum=1)
    if dim % heads:
        raise ValueError(f"{name}={heads} must divide the dimension {dim}")
    return heads
