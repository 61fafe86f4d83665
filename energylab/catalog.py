"""The catalog: every attention form as an (energy, operator) pair, and ``verify`` that checks the pair.

``FORMS[name]`` is an :class:`AttentionForm`. ``verify(name)`` draws random float64 instances with the form's
``sample`` and returns the largest relative error of its operator against autograd on its energy:

- ``kind == "gradient"``: update = −∇E (on-sphere forms: −P_x ∇E, the tangent part);
- ``kind == "newton"``:   update = −[∇²E]⁻¹ ∇E (Hessian from ``torch.autograd.functional.hessian``);
- ``kind == "approx"``:   update approximates the exact form ``reference`` with an error of order ``order`` in a
  correction size s; ``verify`` shrinks s geometrically (``shrink(params, s)``), fits the log-log slope of the
  relative error and returns |slope − order| / order (a relative error of the *order*).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, NamedTuple

import torch

from energylab import energies as en
from energylab import operators as op

__all__ = ["Equation", "AttentionForm", "FORMS", "verify", "reference_update"]


class Equation(NamedTuple):
    """LaTeX of a form, for the Atlas table."""

    energy: str  # the energy E(x; params)
    update: str  # the operator it induces (the direction of one step)


@dataclass(frozen=True)
class AttentionForm:
    """One attention (or feedforward) form: its energy, its operator and how to draw a valid instance."""

    name: str  # key in FORMS
    paper: str  # bibtex key in book/references.bib
    equation: Equation  # LaTeX of the energy and of the update
    kind: str  # "gradient" | "newton" | "approx"
    energy: Callable[..., torch.Tensor]  # energy(x, **params) -> scalar tensor
    update: Callable[..., torch.Tensor]  # update(x, **params) -> tensor shaped like x
    sample: Callable[..., tuple]  # sample(n_tokens, dim, generator=None, dtype=float64) -> (x, params)
    note: str = ""  # what is exact, what is an identification or an approximation
    on_sphere: bool = False  # x lives on a sphere: the update is the tangent part of −∇E
    reference: str | None = None  # approx only: the exact form it approximates
    order: int | None = None  # approx only: error = O(s^order) in the correction size s
    shrink: Callable[[dict, float], dict] | None = None  # approx only: params with the correction scaled by s


# ----------------------------------------------------------------------------- sampling helpers
def _randn(generator, dtype, *shape) -> torch.Tensor:
    return torch.randn(*shape, generator=generator, dtype=dtype)


def _unit_rows(generator, dtype, *shape) -> torch.Tensor:
    x = _randn(generator, dtype, *shape)
    return x / x.norm(dim=-1, keepdim=True)


def _well_conditioned(generator, dtype, dim: int, spread: float = 0.3) -> torch.Tensor:
    """A random (dim, dim) matrix I + spread·G/√dim (invertible with high probability, condition ~ 2)."""
    return torch.eye(dim, dtype=dtype) + spread * _randn(generator, dtype, dim, dim) / math.sqrt(dim)


def _temperature(generator, dtype) -> float:
    return float(0.5 + torch.rand((), generator=generator, dtype=dtype))  # T in [0.5, 1.5)


def sample_sphere_tokens(n_tokens: int, dim: int, generator=None, dtype=torch.float64, rho: float = 1.5):
    """z and tokens with ‖z‖ = ‖W h_i‖ = ρ for all i (the hypothesis of paper 000, Theorem 1).

    Returns (z (3, d), {"H": (N, d), "W": (d, d), "T": float}); three queries exercise batching.
    """
    W = _well_conditioned(generator, dtype, dim)
    targets = rho * _unit_rows(generator, dtype, n_tokens, dim)  # the W h_i, on the sphere
    H = torch.linalg.solve(W, targets.T).T  # h_i = W⁻¹ (ρ u_i)
    z = rho * _unit_rows(generator, dtype, 3, dim)
    return z, {"H": H, "W": W, "T": _temperature(generator, dtype)}


def _sample_free(n_tokens: int, dim: int, generator=None, dtype=torch.float64):
    """Unconstrained z (3, d), H (N, d), W (d, d), T."""
    W = _well_conditioned(generator, dtype, dim)
    H = _randn(generator, dtype, n_tokens, dim)
    z = _randn(generator, dtype, 3, dim)
    return z, {"H": H, "W": W, "T": _temperature(generator, dtype)}


# ----------------------------------------------------------------------------- the forms
FORMS: dict[str, AttentionForm] = {}


def _register(form: AttentionForm) -> None:
    assert form.name not in FORMS, form.name
    assert form.kind in ("gradient", "newton", "approx"), form.kind
    FORMS[form.name] = form


_register(AttentionForm(
    name="softmax_free_energy",
    paper="energy_principle",
    equation=Equation(
        energy=r"F^* = -T\log\sum_i e^{-\|z - W h_i\|^2/2T}",
        update=r"-\nabla_z F^* = \bar h - z,\quad \bar h = \sum_i p_i W h_i",
    ),
    kind="gradient",
    energy=lambda z, H, W, T: en.softmax_free_energy(z, H, W, T).sum(),
    update=op.softmax_free_energy_update,
    sample=sample_sphere_tokens,
    note="Exact gradient. On the sphere ‖z‖ = ‖W h_i‖ = ρ, F* = F̃* + ρ², so one step is softmax attention "
    "(Theorem 1, with W_V = ηW; the paper's ηT comes from a dropped 1/T).",
))

_register(AttentionForm(
    name="dot_product_free_energy",
    paper="energy_principle",
    equation=Equation(
        energy=r"\tilde F^* = -T\log\sum_i e^{z^\top W h_i/T}",
        update=r"-\nabla_z \tilde F^* = \sum_i \mathrm{softmax}_i(z^\top W h_i/T)\, W h_i",
    ),
    kind="gradient",
    energy=lambda z, H, W, T: en.dot_product_free_energy(z, H, W, T).sum(),
    update=op.dot_product_free_energy_update,
    sample=_sample_free,
    note="Exact gradient for any z; attention (eq. 1) is z + η·update with W_QᵀW_K = W, W_V = ηW.",
))


# ----------------------------------------------------------------------------- verification
def _flat_grad_hessian(energy: Callable, x: torch.Tensor, params: dict, hessian: bool):
    x = x.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(energy(x, **params), x)
    if not hessian:
        return g, None
    h = torch.autograd.functional.hessian(lambda y: energy(y, **params), x.detach())
    return g, h.reshape(x.numel(), x.numel())


def reference_update(form: AttentionForm, x: torch.Tensor, params: dict) -> torch.Tensor:
    """What ``form.update`` must equal, computed by autograd on ``form.energy`` (gradient / newton kinds)."""
    if form.kind == "gradient":
        g, _ = _flat_grad_hessian(form.energy, x, params, hessian=False)
        if form.on_sphere:
            g = op.tangent_projection(x, g)
        return -g
    if form.kind == "newton":
        g, h = _flat_grad_hessian(form.energy, x, params, hessian=True)
        return -torch.linalg.solve(h, g.reshape(-1)).reshape(x.shape)
    raise ValueError(f"form {form.name!r} has kind {form.kind!r}: no autograd reference (use verify)")


def _relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp_min(torch.finfo(b.dtype).tiny))


def approx_slope(form: AttentionForm, x: torch.Tensor, params: dict, scales=(0.2, 0.1, 0.05, 0.025)) -> float:
    """Fitted log-log slope of the relative error of ``form`` against its exact ``reference`` as s shrinks."""
    exact = FORMS[form.reference]
    errs = []
    for s in scales:
        p = form.shrink(params, s)
        errs.append(_relative_error(form.update(x, **p), exact.update(x, **p)))
    log_s = torch.log(torch.tensor(scales, dtype=torch.float64))
    log_e = torch.log(torch.tensor(errs, dtype=torch.float64))
    centred = log_s - log_s.mean()
    return float((centred * (log_e - log_e.mean())).sum() / centred.pow(2).sum())


def verify(name: str, trials: int = 3, generator: torch.Generator | None = None,
           n_tokens: int = 7, dim: int = 5) -> float:
    """Largest relative error of ``FORMS[name]``'s operator over ``trials`` random float64 instances.

    gradient/newton kinds: ‖update − reference‖ / ‖reference‖ with the reference from autograd;
    approx kind: |fitted order − stated order| / stated order (see the module docstring).
    """
    if name not in FORMS:
        raise ValueError(f"name must be one of {sorted(FORMS)}, got {name!r}")
    if not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials must be a positive int, got {trials!r}")
    form = FORMS[name]
    worst = 0.0
    for _ in range(trials):
        x, params = form.sample(n_tokens, dim, generator=generator, dtype=torch.float64)
        if form.kind == "approx":
            err = abs(approx_slope(form, x, params) - form.order) / form.order
        else:
            err = _relative_error(form.update(x, **params), reference_update(form, x, params))
        worst = max(worst, err)
    return worst
