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


def check_tensor(name: str, x, ndim: int | tuple[int, ...] | None = None, min_ndim: int | None = None,
                 layout: str = "") -> torch.Tensor:
    """Require a floating tensor with finite entries (and, if given, a number of dims, or at least ``min_ndim``
    dims; ``layout`` such as "(..., N, d)" is shown in the message)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if x.dim() not in allowed:
            raise ValueError(f"{name} must have {' or '.join(map(str, allowed))} dims, got shape {tuple(x.shape)}")
    if min_ndim is not None and x.dim() < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dims{' ' + layout if layout else ''}, "
                         f"got shape {tuple(x.shape)}")
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


def check_same_dtype(*named: tuple[str, torch.Tensor | None]) -> None:
    """Require the tensors ``(name, tensor)`` to share the first one's dtype (None entries are skipped).

    Under autocast mixed dtypes are by design (a bf16 activation meets float32 weights): not checked there.
    """
    tensors = [(n, t) for n, t in named if isinstance(t, torch.Tensor)]
    if not tensors or any(torch.is_autocast_enabled(t.device.type) for _, t in tensors):
        return
    first, reference = tensors[0]
    for name, t in tensors[1:]:
        if t.dtype != reference.dtype:
            raise TypeError(f"{name} has dtype {t.dtype}, which differs from {first} ({reference.dtype}): they "
                            f"must match (convert one, e.g. with .to({reference.dtype}))")


def check_interval(name: str, value, low: float | None = None, high: float | None = None,
                   low_open: bool = False, high_open: bool = False) -> float:
    """A real number (as for :func:`check_number`) in the interval from ``low`` to ``high`` (None: unbounded),
    closed unless ``low_open`` / ``high_open``; returns it as a float."""
    v = check_number(name, value)
    below = low is not None and (v < low or (low_open and v == low))
    above = high is not None and (v > high or (high_open and v == high))
    if not math.isfinite(v) or below or above:
        lo = "(-inf" if low is None else f"{'(' if low_open else '['}{low:g}"
        hi = "inf)" if high is None else f"{high:g}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be a finite number in {lo}, {hi}, got {value!r}")
    return v


def check_simplex(name: str, p: torch.Tensor, tol: float | None = None) -> None:
    """Require p (..., N) to be a distribution over its last dim: entries >= 0 summing to 1 (within ``tol``,
    default max(1e-6, √eps) of p's dtype: wide enough for an optimiser's finite-difference steps off the simplex,
    far below a sum of 2)."""
    if value_checks_off():
        return
    if (p < 0).any():
        raise ValueError(f"{name} must be non-negative (a distribution over its last dim), "
                         f"got a minimum of {float(p.min()):g}")
    tol = max(1e-6, math.sqrt(torch.finfo(p.dtype).eps)) if tol is None else tol
    sums = p.sum(-1)
    worst = (sums - 1).abs()
    if worst.numel() and float(worst.max()) > tol:
        raise ValueError(f"{name} must sum to 1 over its last dim (a distribution), got a sum of "
                         f"{float(sums.flatten()[worst.flatten().argmax()]):g}")


def check_labels(name: str, y, n_classes: int, length: int | None = None) -> torch.Tensor:
    """Require class indices: an integer tensor (of ``length`` entries, if given) with values in 0..n_classes-1."""
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of class indices, got {type(y).__name__}")
    if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer class indices, got dtype {y.dtype}")
    if y.dim() != 1 or (length is not None and len(y) != length):
        want = f"({length},)" if length is not None else "(M,)"
        raise ValueError(f"{name} must have shape {want}, got {tuple(y.shape)}")
    if y.numel() and (int(y.min()) < 0 or int(y.max()) >= n_classes):
        raise ValueError(f"{name} must lie in 0..{n_classes - 1} (n_classes={n_classes}), "
                         f"got values {int(y.min())}..{int(y.max())}")
    return y


def check_instance(name: str, value, cls: type, hint: str = ""):
    """Require ``value`` to be an instance of ``cls`` (e.g. a config dataclass, not a dict); returns it."""
    if not isinstance(value, cls):
        article = "an" if cls.__name__[:1].lower() in "aeiou" else "a"
        raise TypeError(f"{name} must be {article} {cls.__name__}, got {type(value).__name__}"
                        + (f" ({hint})" if hint else ""))
    return value


def check_bool(name: str, value) -> bool:
    """Require a bool (or a NumPy bool): a flag, never a number standing in for one."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r} of type {type(value).__name__}")


def check_dtype(name: str, x: torch.Tensor, allowed: tuple[torch.dtype, ...], why: str = "") -> None:
    """Require x's dtype to be one of ``allowed`` (e.g. no 16-bit floats where a kernel has none)."""
    if x.dtype not in allowed:
        shown = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise TypeError(f"{name} must have dtype {shown}, got {x.dtype}" + (f" ({why})" if why else ""))
