"""Tokens on the sphere: the interaction energy of Geshkovski et al. (2023) and symmetric self-attention (paper 003).

E_β of the SA/USA particle flows (multi-head through Q, K: the energy of :mod:`energylab.flows`), its rate of change
along any flow (:func:`energy_rate`), the symmetric self-attention energy with W_V = A = Aᵀ (Tomihari & Karakida's
Prop. 4.1 states the same condition for factored weights, W_QW_Kᵀ = A = Aᵀ and W_V = A: the catalog form
``generalised_symmetric_sa`` of :mod:`energylab.forms.recurrent`, chapter 9), their tangent gradients (on-sphere
forms: the update is the tangent part P_x of −∇E, :mod:`energylab.sphere`), the samplers and the ``register`` calls.
Shapes: tokens x (..., N, d) as rows; per-head Q, K (H, d_h, d); A (d, d) symmetric.
"""
from __future__ import annotations

import math

import torch

from energylab._checks import (
    check_count,
    check_dim,
    check_overflow,
    check_positive,
    check_same_dtype,
    check_tensor,
)
from energylab.catalog import AttentionForm, Equation, register
from energylab.forms._common import randn, unit_rows
from energylab.sphere import tangent_projection

# the chapter that derives this family's forms (a form derived elsewhere names its own)
CHAPTER = "06_particles_on_spheres"
# the Atlas (chapter 11) groups this module's forms under this title
FAMILY = "Sphere and symmetric self-attention"

__all__ = ["sphere_interaction_energy", "energy_rate", "symmetric_attention_energy", "sphere_interaction_update",
           "symmetric_attention_update"]


# ----------------------------------------------------------------------------- energies
def sphere_interaction_energy(x: torch.Tensor, beta, Q: torch.Tensor | None = None,
                              K: torch.Tensor | None = None) -> torch.Tensor:
    """E_β = (1/(2βn²)) Σ_h Σ_ij exp(β⟨Q_h x_i, K_h x_j⟩) (Geshkovski et al. 2023, Sec. 3). x: (..., n, d) -> (...).

    Without Q, K: one head with Q = K = I, E_β = (1/(2βn²)) Σ_ij exp(β⟨x_i, x_j⟩) (the catalog form). With per-head
    Q, K (H, d_h, d): the energy of the SA/USA flows of :mod:`energylab.flows`. When every V_h = Q_hᵀK_h, the
    unnormalised dynamics (USA) is the tangent gradient *ascent* of E_β, up to the time scale n, with any number of
    heads; SA climbs it with one head only (each head's own normaliser Z_{h,i} breaks the argument with several,
    chapter 6 and :func:`energy_rate`).
    Where exp(β⟨Q_h x_i, K_h x_j⟩) overflows the dtype (β ≳ 709 in float64 on the unit sphere with Q = K = I) a
    ValueError names beta.
    """
    check_tensor("x", x)
    check_count("x", x, -2)
    beta = check_positive("beta", beta)
    n = x.shape[-2]
    if Q is None and K is None:
        gram = torch.einsum("...ia,...ja->...ij", x, x)  # (..., N, N): ⟨x_i, x_j⟩
        axes, what = (-1, -2), "exp(beta⟨x_i, x_j⟩)"
    else:
        _check_head_maps(x, Q, K)
        q = torch.einsum("hkd,...id->...hik", Q, x)  # (..., H, N, d_h): Q_h x_i
        key = torch.einsum("hkd,...jd->...hjk", K, x)  # (..., H, N, d_h): K_h x_j
        gram = q @ key.transpose(-1, -2)  # (..., H, N, N): ⟨Q_h x_i, K_h x_j⟩
        axes, what = (-1, -2, -3), "exp(beta⟨Q_h x_i, K_h x_j⟩)"
    energy = torch.exp(beta * gram).sum(axes) / (2 * beta * n * n)
    check_overflow("beta", beta, energy, what)
    return energy


def energy_rate(x: torch.Tensor, velocity: torch.Tensor, beta, Q: torch.Tensor | None = None,
                K: torch.Tensor | None = None) -> torch.Tensor:
    """dE_β/dt = Σ_i ⟨∇_{x_i}E_β, ẋ_i⟩ at tokens x moving with ``velocity`` ẋ. x, velocity: (..., N, d) -> (...).

    The chain rule along any flow; ∇E_β by autograd on :func:`sphere_interaction_energy` (Q, K as there). With
    V_h = Q_hᵀK_h it is ≥ 0 for USA with any number of heads and for SA with one head; for SA with several heads
    the velocity Σ_h (n²/Z_{h,i}) g_{h,i} is not a positive multiple of the tangent gradient Σ_h g_{h,i}, and this
    rate is negative at some states (chapter 6, section 6.2).
    """
    check_tensor("velocity", velocity)
    if velocity.shape != x.shape:
        raise ValueError(f"velocity must have the shape of x {tuple(x.shape)}, got {tuple(velocity.shape)}")
    with torch.enable_grad():
        xg = x.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(sphere_interaction_energy(xg, beta, Q, K).sum(), xg)
    return (grad * velocity).sum((-1, -2))


def _check_head_maps(x, Q, K) -> None:
    """Q and K both given, (H, d_h, d) of the same shape, d the token dimension of x."""
    if Q is None or K is None:
        raise ValueError("Q and K must be given together (or neither, for Q = K = I)")
    check_tensor("Q", Q, ndim=3)
    check_tensor("K", K, ndim=3)
    check_count("Q", Q, 0, what="head", why="a multi-head form needs H ≥ 1 heads")
    check_dim("Q", Q.shape[-1], x.shape[-1])
    if K.shape != Q.shape:
        raise ValueError(f"K must have the shape of Q {tuple(Q.shape)}, got {tuple(K.shape)}")
    check_same_dtype(("x", x), ("Q", Q), ("K", K))


def _check_symmetric(x, A, beta):
    """Validate tokens x (..., N ≥ 1, d), a symmetric A (d, d) and beta > 0; returns beta."""
    check_tensor("x", x)
    check_count("x", x, -2)
    check_tensor("A", A, ndim=2)
    beta = check_positive("beta", beta)
    d = x.shape[-1]
    if A.shape != (d, d):
        raise ValueError(f"A must have shape ({d}, {d}), got {tuple(A.shape)}")
    check_same_dtype(("x", x), ("A", A))
    if not torch.allclose(A, A.T):
        raise ValueError("A must be symmetric (W_V = A = Aᵀ is the symmetric case)")
    return beta


def symmetric_attention_energy(x: torch.Tensor, A: torch.Tensor, beta) -> torch.Tensor:
    """E = −(1/(2β)) Σ_ij exp(β x_iᵀ A x_j) with A = Aᵀ and W_V = A (Tomihari & Karakida's Prop. 4.1 is the same
    condition written for factored weights W_QW_Kᵀ = A: ``generalised_symmetric_sa``).

    x: (..., N, d), A: (d, d) symmetric  ->  (...). Where exp(β x_iᵀA x_j) overflows a ValueError names beta.
    """
    beta = _check_symmetric(x, A, beta)
    scores = torch.einsum("...ia,ab,...jb->...ij", x, A, x)
    energy = -torch.exp(beta * scores).sum((-1, -2)) / (2 * beta)
    check_overflow("beta", beta, energy, "exp(beta x_iᵀA x_j)")
    return energy


# ----------------------------------------------------------------------------- operators
def sphere_interaction_update(x: torch.Tensor, beta) -> torch.Tensor:
    """P_x ∇E_β = P_{x_i}((1/n²) Σ_j exp(β⟨x_i, x_j⟩) x_j): descent on −E_β (Geshkovski et al. 2023).

    The unnormalised dynamics USA is ẋ_i = n · update_i (a time rescaling); the normalised one-head SA divides
    token i by Z_i/n instead, a positive per-token rescaling of the same tangent field. x: (..., n, d) -> (..., n, d).
    Tokens need not be unit but must be non-zero (ValueError naming x); where exp(β⟨x_i, x_j⟩) overflows the dtype
    (β ≳ 709 in float64 on the unit sphere, 88 in float32) the field is not representable: ValueError naming beta.
    """
    check_tensor("x", x)
    check_count("x", x, -2)
    beta = check_positive("beta", beta)
    n = x.shape[-2]
    kernel = torch.exp(beta * torch.einsum("...ia,...ja->...ij", x, x))
    y = kernel @ x / (n * n)
    check_overflow("beta", beta, y, "exp(beta⟨x_i, x_j⟩)")
    return tangent_projection(x, y)


def symmetric_attention_update(x: torch.Tensor, A: torch.Tensor, beta) -> torch.Tensor:
    """−P_x ∇E = P_{x_i}(Σ_j exp(β x_iᵀA x_j) A x_j): unnormalised self-attention with W_V = A = Aᵀ.

    W_V = A = Aᵀ, the condition of Tomihari & Karakida's Prop. 4.1 (there for factored W_QW_Kᵀ = A); continuous
    time, projected on the sphere. One-head softmax attention divides token i by Z_i > 0: a descent direction too,
    but not this gradient (with several heads, each with its own Z_{h,i}, not even that: chapter 6).
    x: (..., N, d), non-zero rows (ValueError naming x); where exp(β x_iᵀA x_j) overflows the dtype a ValueError
    names beta.
    """
    beta = _check_symmetric(x, A, beta)
    kernel = torch.exp(beta * torch.einsum("...ia,ab,...jb->...ij", x, A, x))
    y = kernel @ x @ A
    check_overflow("beta", beta, y, "exp(beta x_iᵀA x_j)")
    return tangent_projection(x, y)


# ----------------------------------------------------------------------------- samplers
def _sample_tokens_on_sphere(n_tokens, dim, generator=None, dtype=torch.float64):
    """x (N, d) on the unit sphere, {"beta" in [0.5, 1.5)}."""
    return unit_rows(generator, dtype, n_tokens, dim), {"beta": 0.5 + float(torch.rand((), generator=generator))}


def _sample_symmetric(n_tokens, dim, generator=None, dtype=torch.float64):
    """x (N, d) on the unit sphere, {"beta", "A": (d, d) symmetric Gaussian / √d}."""
    x, params = _sample_tokens_on_sphere(n_tokens, dim, generator, dtype)
    B = randn(generator, dtype, dim, dim) / math.sqrt(dim)
    return x, {**params, "A": (B + B.T) / 2}


# ----------------------------------------------------------------------------- the catalog
register(AttentionForm(
    chapter=CHAPTER,
    name="sphere_interaction", paper="geshkovski2023", kind="gradient", on_sphere=True,
    equation=Equation(r"-E_\beta = -\frac{1}{2\beta n^2}\sum_{ij} e^{\beta\langle x_i, x_j\rangle}",
                      r"P_{x_i}\Big(\tfrac{1}{n^2}\sum_j e^{\beta\langle x_i,x_j\rangle}x_j\Big)"),
    energy=lambda x, beta: -sphere_interaction_energy(x, beta),
    update=sphere_interaction_update, sample=_sample_tokens_on_sphere,
    note="Exact tangent gradient of −E_β; USA is n × this field, SA rescales each token by n/Z_i > 0.",
))
register(AttentionForm(
    chapter=CHAPTER,
    name="symmetric_self_attention", paper="tomihari2025jacobians", kind="gradient", on_sphere=True,
    equation=Equation(r"E = -\frac{1}{2\beta}\sum_{ij} e^{\beta x_i^\top A x_j},\ A = A^\top",
                      r"P_{x_i}\Big(\sum_j e^{\beta x_i^\top A x_j} A x_j\Big)"),
    energy=lambda x, A, beta: symmetric_attention_energy(x, A, beta),
    update=symmetric_attention_update, sample=_sample_symmetric,
    note="Exact tangent gradient for W_V = A = W_QW_Kᵀ = Aᵀ, parametrised by A itself. generalised_symmetric_sa is "
    "the same energy and condition (paper 003's Prop. 4.1) parametrised by factored W_Q ≠ W_K; nothing is relaxed. "
    "One-head softmax SA is a positively rescaled version, still a descent direction; multi-head SA is not.",
))
