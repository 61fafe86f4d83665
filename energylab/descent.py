"""Attention as repeated descent: iterate an operator while recording its energy, and Algorithm 1.

Paper 000 (*Transformers as intrinsic optimizers*): a layer is one step z ← z + η·u(z) where u = −∇F* is the
operator of a free energy (:mod:`energylab.forms.free_energy`); a looped (weight-shared) layer repeats the step with the
same W (App. A.4). This module holds the generic pieces chapter 2 needs and that no single energy owns:

- :func:`iterate`: apply any update x ← step(x) K times and record the energy of every state (the one loop
  behind looped layers and Hopfield retrieval, :func:`energylab.experiments.hopfield.retrieve`);
- :func:`descend`: iterate any operator (optionally projected onto the sphere) and record the energy per step;
- :func:`multihead_sphere_instance` and :func:`multihead_attention`: an instance satisfying the hypothesis of
  Theorem 2 and the multi-head layer of eq. (11), assembled from the single-head
  :func:`~energylab.forms.free_energy.attention_step` with W_{Q,h}ᵀW_{K,h} = W_{1,h}ᵀW_{2,h} and W_{O,h}W_{V,h}
  = (η/H) W_{1,h}ᵀW_{2,h};
- :func:`alternating_optimisation`: Algorithm 1, a one-layer classifier whose forward pass is descent on F* in
  z and whose parameter update is descent on W and on the readout E.

Shapes: N tokens (the rows of H), d dim, heads heads, d_h = d/heads, M samples, C classes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from energylab._checks import (
    check_divides,
    check_instance,
    check_int,
    check_interval,
    check_labels,
    check_positive,
    check_same_dtype,
    check_tensor,
)
from energylab.forms.free_energy import attention_step, softmax_free_energy
from energylab.sphere import sphere_step

__all__ = ["Descent", "iterate", "descend", "multihead_sphere_instance", "multihead_attention",
           "per_sample_free_energy", "cluster_task", "AlternatingConfig", "AlternatingHistory",
           "alternating_optimisation"]


# ----------------------------------------------------------------------------- iterating an operator
@dataclass
class Descent:
    """A run of x_{k+1} = step(x_k): ``states`` (K+1, *x.shape) and ``energies`` (K+1, *e.shape) = E(x_k), where e
    is what the energy returns for one state (a scalar, or one value per query)."""

    states: torch.Tensor
    energies: torch.Tensor

    def increases(self, tol: float = 1e-12) -> int:
        """How many steps raised the energy by more than ``tol`` (relative to the magnitude of E), counted per
        entry when the energy has one value per query."""
        e = self.energies
        return int(((e[1:] - e[:-1]) > tol * e[:-1].abs().clamp_min(1.0)).sum())


def iterate(step: Callable[[torch.Tensor], torch.Tensor], energy: Callable[[torch.Tensor], torch.Tensor],
            x0: torch.Tensor, steps: int) -> Descent:
    """x_{k+1} = step(x_k) for k < ``steps``, recording every state and its energy E(x_k), under ``no_grad``.

    ``energy(x)`` may return a scalar or one value per query (then :meth:`Descent.increases` counts per query).
    """
    x, states, values = x0, [], []
    with torch.no_grad():
        for k in range(steps + 1):
            states.append(x)
            values.append(energy(x))
            if k == steps:
                break
            x = step(x)
    return Descent(torch.stack(states), torch.stack(values))


def descend(update: Callable[[torch.Tensor], torch.Tensor], energy: Callable[[torch.Tensor], torch.Tensor],
            x0: torch.Tensor, eta: float, steps: int, sphere: bool = False) -> Descent:
    """Iterate x ← x + η·update(x) (or the projected :func:`~energylab.sphere.sphere_step` when ``sphere``).

    ``energy(x)`` may return one value per query; the recorded energy is their sum. Nothing is differentiated:
    the operator is the closed form, so the trajectory is exactly what a looped layer computes.
    """
    check_tensor("x0", x0)
    eta = check_positive("eta", eta)
    steps = check_int("steps", steps, minimum=0)

    def step(x):
        u = update(x)
        return sphere_step(x, u, eta) if sphere else x + eta * u

    return iterate(step, lambda x: energy(x).sum(), x0.detach().clone(), steps)


# ----------------------------------------------------------------------------- Theorem 2 (multi-head)
def multihead_sphere_instance(n_tokens: int, dim: int, heads: int, rho: float = 1.0, queries: int = 1,
                              generator: torch.Generator | None = None, dtype=torch.float64):
    """Random z (queries, d), H (N, d), W1, W2 (heads, d_h, d) with ‖W_{1,h} z‖ = ‖W_{2,h} h_i‖ = ρ for all h, i.

    The hypothesis of paper 000, Theorem 2. The rows of all W_{1,h} together form a random rotation, so
    Σ_h W_{1,h}ᵀW_{1,h} = I; W2 is a random well-conditioned matrix split into heads.
    """
    n_tokens, dim = check_int("n_tokens", n_tokens, minimum=1), check_int("dim", dim, minimum=1)
    heads = check_divides("heads", heads, dim)
    rho = check_positive("rho", rho)
    dh = dim // heads

    def on_spheres(n):  # (n, d): each head's block has norm ρ
        u = torch.randn(n, heads, dh, generator=generator, dtype=dtype)
        return (rho * u / u.norm(dim=-1, keepdim=True)).reshape(n, dim)

    W1 = torch.linalg.qr(torch.randn(dim, dim, generator=generator, dtype=dtype))[0]  # (d, d) orthogonal
    W2 = torch.eye(dim, dtype=dtype) + 0.3 * torch.randn(dim, dim, generator=generator, dtype=dtype) / dim ** 0.5
    z = on_spheres(queries) @ W1  # W1 z = blocks of norm ρ (W1 orthogonal: z = W1ᵀ u)
    H = torch.linalg.solve(W2, on_spheres(n_tokens).T).T  # W2 h_i = blocks of norm ρ
    return z, H, W1.reshape(heads, dh, dim), W2.reshape(heads, dh, dim)  # (heads, d_h, d)


def multihead_attention(z: torch.Tensor, H: torch.Tensor, W_QK: torch.Tensor, W_OV: torch.Tensor, T) -> torch.Tensor:
    """MHA(z) = z + Σ_h Σ_i softmax_i(zᵀ W_QK,h h_i / T) W_OV,h h_i (paper 000, eq. 11).

    W_QK, W_OV: (heads, d, d), the products W_{Q,h}ᵀW_{K,h} and W_{O,h}W_{V,h}. Each head is the library's
    single-head :func:`~energylab.forms.free_energy.attention_step` minus its residual. z: (..., d)  ->  (..., d).
    """
    check_tensor("W_QK", W_QK, ndim=3)
    check_tensor("W_OV", W_OV, ndim=3)
    if W_QK.shape != W_OV.shape:
        raise ValueError(f"W_OV must have the shape of W_QK {tuple(W_QK.shape)}, got {tuple(W_OV.shape)}")
    out = z
    for qk, ov in zip(W_QK, W_OV):
        out = out + (attention_step(z, H, qk, ov, T) - z)
    return out


# ----------------------------------------------------------------------------- Algorithm 1
def cluster_task(n_samples: int, n_tokens: int = 16, dim: int = 8, n_classes: int = 4, in_cluster: float = 0.5,
                 radius: float = 3.0, spread: float = 0.5, noise: float = 2.0,
                 generator: torch.Generator | None = None, dtype=torch.float64):
    """A set-classification task for Algorithm 1: which of C centres does the densest group of tokens sit at?

    Each sample has round(in_cluster·N) tokens around its class centre (radius ``radius``, Gaussian ``spread``)
    and the rest are distractors N(0, noise²). Returns H (M, N, d) with tokens shuffled, labels y (M,).
    """
    n_samples = check_int("n_samples", n_samples, minimum=0)
    n_tokens = check_int("n_tokens", n_tokens, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    n_classes = check_int("n_classes", n_classes, minimum=1)
    in_cluster = check_interval("in_cluster", in_cluster, 0, 1)  # a fraction of the tokens
    radius = check_positive("radius", radius, scalar=True)
    spread = check_positive("spread", spread, allow_zero=True, scalar=True)
    noise = check_positive("noise", noise, allow_zero=True, scalar=True)
    centres = torch.randn(n_classes, dim, generator=generator, dtype=dtype)
    centres = radius * centres / centres.norm(dim=-1, keepdim=True)  # (C, d)
    y = torch.randint(n_classes, (n_samples,), generator=generator)
    k = round(in_cluster * n_tokens)
    near = centres[y].unsqueeze(1) + spread * torch.randn(n_samples, k, dim, generator=generator, dtype=dtype)
    far = noise * torch.randn(n_samples, n_tokens - k, dim, generator=generator, dtype=dtype)
    H = torch.cat([near, far], 1)  # (M, N, d)
    order = torch.rand(n_samples, n_tokens, generator=generator).argsort(-1)
    return torch.take_along_dim(H, order.unsqueeze(-1), 1), y


def per_sample_free_energy(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """F*(z_m; H_m, W) for M samples, each with its own tokens: z (M, d), H (M, N, d)  ->  (M,).

    The library's :func:`~energylab.forms.free_energy.softmax_free_energy`, vectorised over samples with ``torch.vmap``.
    """
    check_tensor("H", H, ndim=3)
    if len(H) == 0:  # vmap cannot map over zero samples; (M,) = (0,) values, still in the graph of z and W
        if z.dim() != 2 or len(z) != 0:
            raise ValueError(f"z must have shape (M, d) with M = 0 (H holds no sample), got {tuple(z.shape)}")
        return z.sum(-1) + 0 * W.sum()
    return torch.vmap(softmax_free_energy, in_dims=(0, 0, None, None))(z, H, W, T)


@dataclass
class AlternatingConfig:
    """Algorithm 1 of paper 000, full batch. Defaults: the chapter's digits classifier."""

    epochs: int = 60  # K: each epoch is one forward step on every z and one update of W and E
    eta: float = 0.5  # rate of the forward step z ← z − η∇_z F* (the layer's η)
    lr_W: float = 0.5  # rate of the update of W
    lr_E: float = 0.5  # rate of the update of the readout E
    T: float = 1.0  # temperature of F*
    w_objective: str = "energy"  # "energy": W descends F* only (Algorithm 1 as written); "joint": CE + F*
    seed: int = 0  # initialisation of W (identity + noise) and E (small noise)

    def __post_init__(self):
        check_int("epochs", self.epochs, minimum=0)
        for name in ("eta", "lr_W", "lr_E", "T"):
            check_positive(name, getattr(self, name), scalar=True)
        if self.w_objective not in ("energy", "joint"):
            raise ValueError(f"w_objective must be 'energy' or 'joint', got {self.w_objective!r}")
        check_int("seed", self.seed)


@dataclass
class AlternatingHistory:
    """Per epoch: the two objectives of eq. (6) and the accuracies; the final parameters and states."""

    free_energy: list[float] = field(default_factory=list)  # mean F*(z_m, W) over training samples
    cross_entropy: list[float] = field(default_factory=list)  # mean CE(Eᵀ z_m, y_m)
    train_accuracy: list[float] = field(default_factory=list)
    test_accuracy: list[float] = field(default_factory=list)
    W: torch.Tensor | None = None
    E: torch.Tensor | None = None


def alternating_optimisation(H: torch.Tensor, y: torch.Tensor, H_test: torch.Tensor, y_test: torch.Tensor,
                             n_classes: int, config: AlternatingConfig = AlternatingConfig()) -> AlternatingHistory:
    """Algorithm 1 (paper 000, Sec. 2.2): alternate a descent step on each z (forward) with steps on W and E.

    H: (M, N, d) training token sets, y: (M,) labels; H_test, y_test likewise. Every sample keeps its state z_m
    across epochs (z_m⁰ = mean token); test samples take the same forward steps with the same W but never update W or E.
    ``w_objective="joint"`` differentiates CE through the current forward step (backprop through one layer).
    """
    check_tensor("H", H, ndim=3)
    check_tensor("H_test", H_test, ndim=3)
    n_classes = check_int("n_classes", n_classes, minimum=1)
    check_labels("y", y, n_classes, length=len(H))
    check_labels("y_test", y_test, n_classes, length=len(H_test))
    if H_test.shape[-1] != H.shape[-1]:
        raise ValueError(f"H_test: last dimension must be {H.shape[-1]} (H's), got {H_test.shape[-1]}")
    check_same_dtype(("H", H), ("H_test", H_test))
    check_instance("config", config, AlternatingConfig)
    config.__post_init__()  # fields may have been changed after construction
    g = torch.Generator().manual_seed(config.seed)
    d, dtype = H.shape[-1], H.dtype
    W = (torch.eye(d, dtype=dtype) + 0.1 * torch.randn(d, d, generator=g, dtype=dtype)).requires_grad_(True)
    E = (0.01 * torch.randn(d, n_classes, generator=g, dtype=dtype)).requires_grad_(True)
    z, z_test = H.mean(1), H_test.mean(1)  # z_m⁰: the mean of the sample's tokens (a mean-pooled [CLS])
    hist = AlternatingHistory()

    def forward_step(z_k, tokens, keep_graph):  # z^{k+1} = z^k − η ∇_z F*(z^k, W)  (= one attention layer)
        z_k = z_k.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(per_sample_free_energy(z_k, tokens, W, config.T).sum(), z_k,
                                      create_graph=keep_graph)
        return z_k - config.eta * grad

    for _ in range(config.epochs):
        z_new = forward_step(z, H, keep_graph=config.w_objective == "joint")
        z_test = forward_step(z_test, H_test, keep_graph=False).detach()
        F = per_sample_free_energy(z_new if config.w_objective == "joint" else z_new.detach(), H, W, config.T).mean()
        ce = torch.nn.functional.cross_entropy(z_new.detach() @ E, y)  # CE(Eᵀz, y), eq. (5)
        w_loss = F + (torch.nn.functional.cross_entropy(z_new @ E.detach(), y) if config.w_objective == "joint" else 0)
        gW, = torch.autograd.grad(w_loss, W)
        gE, = torch.autograd.grad(ce, E)
        with torch.no_grad():
            W -= config.lr_W * gW
            E -= config.lr_E * gE
            z = z_new.detach()
            hist.free_energy.append(float(F))
            hist.cross_entropy.append(float(ce))
            hist.train_accuracy.append(float(((z @ E).argmax(-1) == y).double().mean()))
            hist.test_accuracy.append(float(((z_test @ E).argmax(-1) == y_test).double().mean()))
    hist.W, hist.E = W.detach(), E.detach()
    return hist
