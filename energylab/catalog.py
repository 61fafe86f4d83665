"""The catalog: every attention form as an (energy, operator) pair, and ``verify`` that checks the pair.

``FORMS[name]`` is an :class:`AttentionForm`. ``verify(name)`` draws random float64 instances with the form's
``sample`` and returns the largest relative error of its operator against autograd on its energy:

- ``kind == "gradient"``: update = −∇E (on-sphere forms: −P_x ∇E, the tangent part);
- ``kind == "newton"``:   update = −[∇²E]⁻¹ ∇E (Hessian from ``torch.autograd.functional.hessian``);
- ``kind == "approx"``:   update approximates the exact form ``reference`` with an error of order ``order`` in a
  correction size s; ``verify`` shrinks s geometrically (``shrink(params, s)``), fits the log-log slope of the
  relative error and returns |slope − order| / order (a relative error of the *order*).

The forms themselves live in :mod:`energylab.forms`, one module per family, and register themselves when that
package is imported. This module never imports them (the families import this one: no cycle). What fills the
registry is ``energylab/__init__.py``: ``from energylab import catalog`` (or ``energylab.catalog``) imports
:mod:`energylab.forms` first and then returns this module, so ``catalog.FORMS`` holds every form; so does importing
anything from ``energylab.forms`` (its ``__init__`` imports every family). A program whose first import of this
module is direct (``from energylab.catalog import verify``) and that touches no form sees an empty registry until
it imports ``energylab.forms``; ``verify`` says so.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, NamedTuple

import torch

from energylab._checks import check_int
from energylab.sphere import tangent_projection

__all__ = ["Equation", "AttentionForm", "Layer", "FORMS", "LAYERS", "register", "register_layer", "verify",
           "reference_update", "approx_slope", "EXACT_TOL", "NEWTON_TOL", "ORDER_TOL"]

# What tests/forms/test_catalog.py asserts of verify's error, and what chapter 11 states: gradient forms against
# autograd (relative), Newton forms against a Hessian solve (relative), approximations' fitted order (relative)
EXACT_TOL, NEWTON_TOL, ORDER_TOL = 1e-10, 1e-8, 0.05


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
    min_tokens: int = 1  # the fewest tokens an instance may have (local attention needs another token to see)
    multi_head: bool = False  # the sampler draws heads_for(dim) heads: verify at a composite dim to test several
    chapter: str = ""  # the notebook (NN_slug) of the chapter that derives the form; the Atlas links its row there

    @property
    def layers(self) -> tuple["Layer", ...]:
        """The trainable layers built on this form (registered by :mod:`energylab.layers`)."""
        return tuple(layer for layer in LAYERS if layer.form == self.name)


class Layer(NamedTuple):
    """A trainable nn.Module built on a form, and how it relates to the form's operator (for the Atlas)."""

    cls: type  # the nn.Module class
    form: str  # the catalog form it is built on
    relation: str  # what the layer adds to or changes in the operator (learned maps, normalisations, ...)


# ----------------------------------------------------------------------------- the registry
FORMS: dict[str, AttentionForm] = {}
LAYERS: list[Layer] = []  # in registration order (the Atlas's table order)
_CHAPTER = re.compile(r"^\d\d_[a-z0-9_]+$")


def register(form: AttentionForm) -> AttentionForm:
    """Add a form to FORMS (names are unique; kind and approx fields are checked)."""
    if form.name in FORMS:
        raise ValueError(f"form {form.name!r} is already registered")
    if form.kind not in ("gradient", "newton", "approx"):
        raise ValueError(f"kind must be 'gradient', 'newton' or 'approx', got {form.kind!r}")
    if form.kind == "approx" and (form.reference is None or form.order is None or form.shrink is None):
        raise ValueError(f"approx form {form.name!r} needs reference, order and shrink")
    if not isinstance(form.chapter, str) or not _CHAPTER.match(form.chapter):
        raise ValueError(f"form {form.name!r} needs the chapter that derives it, as 'NN_slug', got {form.chapter!r}")
    FORMS[form.name] = form
    return form


def register_layer(cls: type, form: str, relation: str) -> type:
    """Record that nn.Module ``cls`` is a trainable layer on the registered form ``form``; returns ``cls``."""
    if form not in FORMS:
        raise ValueError(f"layer {cls.__name__}: no form {form!r} is registered (valid: {sorted(FORMS)})")
    if any(layer.cls is cls and layer.form == form for layer in LAYERS):
        raise ValueError(f"layer {cls.__name__} is already registered on form {form!r}")
    LAYERS.append(Layer(cls, form, relation))
    return cls


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
            g = tangent_projection(x, g)
        return -g
    if form.kind == "newton":
        g, h = _flat_grad_hessian(form.energy, x, params, hessian=True)
        return -torch.linalg.solve(h, g.reshape(-1)).reshape(x.shape)
    raise ValueError(f"form {form.name!r} has kind {form.kind!r}: no autograd reference (use verify)")


def _relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp_min(torch.finfo(b.dtype).tiny))


def approx_slope(form: AttentionForm, x: torch.Tensor, params: dict, scales=(1e-3, 5e-4, 2.5e-4, 1.25e-4)) -> float:
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
    n_tokens ≥ ``FORMS[name].min_tokens`` and dim ≥ 1 (an empty instance has nothing to compare: ValueError).
    """
    if not FORMS:
        raise ValueError("the registry is empty: import energylab.forms (or use `from energylab import catalog`), "
                         "whose family modules register the forms")
    if name not in FORMS:
        raise ValueError(f"name must be one of {sorted(FORMS)}, got {name!r}")
    form = FORMS[name]
    trials = check_int("trials", trials, minimum=1)
    n_tokens = check_int("n_tokens", n_tokens, minimum=form.min_tokens)
    dim = check_int("dim", dim, minimum=1)
    worst = 0.0
    for _ in range(trials):
        x, params = form.sample(n_tokens, dim, generator=generator, dtype=torch.float64)
        if form.kind == "approx":
            err = abs(approx_slope(form, x, params) - form.order) / form.order
        else:
            err = _relative_error(form.update(x, **params), reference_update(form, x, params))
        worst = max(worst, err)
    return worst

