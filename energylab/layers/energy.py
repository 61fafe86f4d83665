"""Design your own attention: an energy you write becomes a trainable layer whose step is its descent.

    layer = energylab.derive(energy, kind="gradient", constraint=None, step=0.5)
    x_next = layer(x)            # x − η ∇E(x), or a projected / normalised / Newton step
    u = layer.update(x)          # the direction −∇E(x) (tangent part on a sphere; Newton: −(∇²E + λI)⁻¹∇E)
    err = layer.verify(closed_form, x)   # ‖u − closed_form‖ / ‖closed_form‖ in float64

The energy, two ways (both declare the learnable parameters):

- an ``nn.Module`` with a method ``energy(x)`` (or, lacking one, its ``forward``); its parameters are the layer's
  (``layer.source`` is the module);
- a function ``energy(x, **params)`` with ``params={"W": nn.Parameter(...), "T": 1.0}``: ``nn.Parameter`` values
  are learned, other tensors are fixed buffers, anything else (numbers) a constant.

It returns a scalar, or one value per batch element (shape (B,) for x (B, ...)): the step uses the gradient of
the sum. A (B,) energy declares that E_b depends on x[b] alone, which is what lets the Newton kind solve one
(numel/B)-sized system per element instead of one over the whole batch. Heads are the energy's business: a
multi-head energy holds (H, d_h, d) maps and sums (or averages) its heads, and ``derive`` needs nothing more.

Constraints act on the last axis (tokens are rows, book/notation.md): ``"sphere"`` takes the tangent part of the
direction, P_x u = u − ⟨x̂, u⟩ x̂, and puts every row back on the unit sphere after the step; ``"rms"`` does the
same on the sphere of radius √d (an RMSNorm without gain).

The direction comes from ``torch.autograd.grad`` with ``create_graph=True`` whenever gradients are recorded
(training), so the loss reaches the energy's parameters through ∇E; under ``torch.no_grad()`` the graph is built
internally and dropped. Newton builds the Hessian with one extra backward pass per coordinate of a block:
O(numel/B) passes, for small blocks only (a few tokens in a few dimensions); ``damping`` λ ≥ 0 is added to its
diagonal, and λ = 0 gives the exact Newton direction.

``energylab.derive`` is :func:`derive` of this module (``energylab/__init__.py`` serves it, as it serves
``setup_notebook``); the layer class is ``energylab.layers.energy.EnergyLayer``.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from energylab._checks import check_positive
from energylab.sphere import normalize, tangent_projection

__all__ = ["derive", "EnergyLayer", "FunctionEnergy", "KINDS", "CONSTRAINTS"]

KINDS = ("gradient", "newton")
CONSTRAINTS = (None, "sphere", "rms")


class FunctionEnergy(nn.Module):
    """A function ``fn(x, **params)`` with its parameters: nn.Parameter -> learned, tensor -> buffer, else constant."""

    def __init__(self, fn: Callable[..., torch.Tensor], params: dict | None = None):
        super().__init__()
        if not callable(fn):
            raise TypeError(f"energy must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.learned = nn.ParameterDict()
        self.constants: dict = {}
        self._buffer_names: list[str] = []
        for key, value in (params or {}).items():
            if not isinstance(key, str) or not key.isidentifier():
                raise ValueError(f"params keys must be argument names of the energy, got {key!r}")
            if isinstance(value, nn.Parameter):
                self.learned[key] = value
            elif isinstance(value, torch.Tensor):
                self.register_buffer(f"fixed_{key}", value)
                self._buffer_names.append(key)
            else:
                self.constants[key] = value

    def params(self) -> dict:
        """The keyword arguments of ``fn``: learned parameters, fixed tensors and constants, by name."""
        out = dict(self.learned.items())
        out.update({k: getattr(self, f"fixed_{k}") for k in self._buffer_names})
        out.update(self.constants)
        return out

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x, **self.params())


class EnergyLayer(nn.Module):
    """One descent step on an energy, built by :func:`derive` (read the module docstring for the rules).

    forward(x) -> x + η·u(x) (then back on the sphere for a constraint), with u = :meth:`update`.
    """

    def __init__(self, energy, params: dict | None = None, kind: str = "gradient", constraint: str | None = None,
                 step: float = 1.0, learn_step: bool = False, damping: float = 1e-3):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if constraint not in CONSTRAINTS:
            raise ValueError(f"constraint must be one of {CONSTRAINTS}, got {constraint!r}")
        if isinstance(energy, nn.Module):
            if params is not None:
                raise ValueError("params is for a function energy; an nn.Module energy declares its own parameters")
            if not callable(getattr(energy, "energy", None)) and type(energy).forward is nn.Module.forward:
                raise TypeError(f"an nn.Module energy needs a method energy(x) or a forward(x); "
                                f"{type(energy).__name__} has neither")
            self.source = energy
        else:
            self.source = FunctionEnergy(energy, params)
        self.kind, self.constraint = kind, constraint
        self.damping = check_positive("damping", damping, allow_zero=True, scalar=True)
        step = check_positive("step", step, scalar=True)
        if learn_step:  # η = exp(log η) stays positive while it learns
            self.log_step = nn.Parameter(torch.tensor(math.log(step)))
        else:
            self.register_buffer("log_step", torch.tensor(math.log(step)))

    @property
    def step(self) -> torch.Tensor:
        """η, the step size."""
        return self.log_step.exp()

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, constraint={self.constraint!r}, damping={self.damping:g}"

    # ------------------------------------------------------------------------- the energy and its gradient
    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """E(x) as the source returns it, checked: a scalar or one value per batch element, (B,)."""
        fn = getattr(self.source, "energy", None)
        try:
            value = fn(x) if callable(fn) else self.source(x)
        except Exception as err:
            err.add_note(f"(raised inside the energy of this {type(self).__name__}, called on x of shape "
                         f"{tuple(x.shape)} and dtype {x.dtype})")
            raise
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"the energy must return a torch.Tensor, got {type(value).__name__}")
        batch = x.shape[0] if x.dim() else None
        if value.dim() == 0 or (value.dim() == 1 and batch is not None and value.shape[0] == batch):
            return value
        raise ValueError(f"the energy must return a scalar or one value per batch element, shape () or "
                         f"({batch},) for x of shape {tuple(x.shape)}; got shape {tuple(value.shape)}: sum (or mean) "
                         f"over the other axes inside the energy")

    def _gradient(self, x: torch.Tensor, create_graph: bool):
        """(x as differentiated, E, ∇E): clear errors for a non-differentiable energy and for NaN/inf."""
        xg = x if x.requires_grad else x.detach().requires_grad_(True)
        value = self.energy(xg)
        _check_finite("energy", value, x)
        if not value.requires_grad:
            raise TypeError(_NOT_DIFFERENTIABLE)
        (g,) = torch.autograd.grad(value.sum(), xg, create_graph=create_graph, allow_unused=True)
        if g is None:
            raise TypeError(_NOT_DIFFERENTIABLE)
        _check_finite("gradient of the energy", g, x)
        return xg, value, g

    def _direction(self, x: torch.Tensor, create_graph: bool) -> torch.Tensor:
        xg, value, g = self._gradient(x, create_graph or self.kind == "newton")
        u = -g if self.kind == "gradient" else self._newton(xg, value, g, create_graph)
        return tangent_projection(x, u) if self.constraint else u

    def _newton(self, xg, value, g, create_graph: bool) -> torch.Tensor:
        """−(∇²E + λI)⁻¹ ∇E, one (n, n) system per block: per batch element for a (B,) energy, else all of x."""
        if xg.numel() == 0:  # an empty batch: nothing to solve
            return torch.zeros_like(xg)
        blocks = xg.shape[0] if value.dim() == 1 else 1
        flat = g.reshape(blocks, -1)  # (blocks, n)
        n = flat.shape[1]
        columns = []
        for j in range(n):  # column j of each block's Hessian: ∂(∇E)_j/∂x (blocks are independent)
            if flat.requires_grad:
                (col,) = torch.autograd.grad(flat[:, j].sum(), xg, retain_graph=True, create_graph=create_graph,
                                             allow_unused=True)
            else:
                col = None  # the gradient does not depend on x: a linear energy has a zero Hessian
            columns.append(torch.zeros_like(xg) if col is None else col)
        hess = torch.stack([c.reshape(blocks, n) for c in columns], dim=-1)  # (blocks, n, n)
        hess = hess + self.damping * torch.eye(n, dtype=hess.dtype, device=hess.device)
        low = hess.dtype in (torch.float16, torch.bfloat16)  # torch has no 16-bit LU: solve in float32
        try:
            u = torch.linalg.solve(hess.float() if low else hess, -flat.unsqueeze(-1).to(
                torch.float32 if low else flat.dtype)).squeeze(-1).to(flat.dtype)
        except RuntimeError as err:  # torch.linalg.LinAlgError is a RuntimeError
            raise ValueError(f"the Hessian (+ damping={self.damping:g}) is singular: increase damping "
                             f"({err})") from None
        _check_finite("Newton direction", u.reshape(xg.shape), xg)
        return u.reshape(xg.shape)

    # ------------------------------------------------------------------------- public
    def update(self, x: torch.Tensor) -> torch.Tensor:
        """The direction u(x): −∇E (gradient), −(∇²E + λI)⁻¹∇E (newton); its tangent part under a constraint."""
        _check_input(x, self.constraint)
        record = torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in self.parameters()))
        with torch.enable_grad():
            u = self._direction(x, create_graph=record)
        return u if record else u.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.step.to(x.dtype) * self.update(x)
        if self.constraint == "sphere":
            return normalize(y)
        if self.constraint == "rms":
            return normalize(y) * math.sqrt(x.shape[-1])
        return y

    def verify(self, closed_form: Callable[..., torch.Tensor], x: torch.Tensor) -> float:
        """Relative error ‖u − c‖/‖c‖ of :meth:`update` against your hand-derived ``closed_form`` in float64.

        A function energy's closed form is called as ``closed_form(x, **params)`` (the energy's own arguments);
        a module energy's as ``closed_form(x)``, reading the module's parameters, which are float64 during the
        call (the layer is converted in place and converted back afterwards).
        """
        if not callable(closed_form):
            raise TypeError(f"closed_form must be callable, got {type(closed_form).__name__}")
        saved = [(m, store, key, t.dtype) for m in self.modules() for store in (m._parameters, m._buffers)
                 for key, t in store.items() if t is not None and t.is_floating_point()]
        self.double()
        try:
            x64 = x.detach().double()
            with torch.no_grad():
                u = self.update(x64)
                if isinstance(self.source, FunctionEnergy):
                    c = closed_form(x64, **self.source.params())
                else:
                    c = closed_form(x64)
        finally:  # each tensor back to its own dtype (a Parameter keeps its identity: .data changes)
            for _, store, key, dtype in saved:
                if isinstance(store[key], nn.Parameter):
                    store[key].data = store[key].data.to(dtype)
                else:
                    store[key] = store[key].to(dtype)
        if not isinstance(c, torch.Tensor) or c.shape != u.shape:
            raise ValueError(f"closed_form must return a tensor shaped like x {tuple(u.shape)}, got "
                             f"{tuple(c.shape) if isinstance(c, torch.Tensor) else type(c).__name__}")
        return float((u - c).norm() / c.norm().clamp_min(torch.finfo(c.dtype).tiny))


_NOT_DIFFERENTIABLE = ("the energy is not differentiable in x: its value does not depend on x through torch "
                       "operations (no .detach(), .item(), .numpy(), int casts or argmax on the way from x to E)")


def _check_input(x, constraint) -> None:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point torch.Tensor, got "
                        f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}")
    if constraint is not None and x.dim() < 1:
        raise ValueError(f"x must have a last axis for constraint={constraint!r}, got shape {tuple(x.shape)}")


def _check_finite(what: str, t: torch.Tensor, x: torch.Tensor) -> None:
    """NaN/inf in ``t``: say which batch elements (the leading axis of x), or that the scalar energy is."""
    bad = ~torch.isfinite(t.detach())
    if not bad.any():
        return
    if t.dim() >= 1 and x.dim() >= 1 and t.shape[0] == x.shape[0]:
        rows = bad.reshape(t.shape[0], -1).any(1).nonzero().flatten().tolist()
        where = f"at batch element{'s' if len(rows) > 1 else ''} {rows[:10]}{' ...' if len(rows) > 10 else ''}"
    else:
        where = "(a scalar energy: return one value per batch element to learn which)"
    raise ValueError(f"the {what} is NaN or inf {where}; check the inputs and the energy's parameters there")


def derive(energy, kind: str = "gradient", constraint: str | None = None, *, params: dict | None = None,
           step: float = 1.0, learn_step: bool = False, damping: float = 1e-3) -> EnergyLayer:
    """The layer of one descent step on ``energy`` (an nn.Module with ``energy(x)``, or ``fn(x, **params)``).

    kind: "gradient" (u = −∇E) or "newton" (u = −(∇²E + λI)⁻¹∇E, λ = ``damping``); constraint: None, "sphere"
    (unit rows) or "rms" (rows of norm √d); step: η > 0 (learned as log η with ``learn_step``).
    """
    return EnergyLayer(energy, params=params, kind=kind, constraint=constraint, step=step, learn_step=learn_step,
                       damping=damping)
