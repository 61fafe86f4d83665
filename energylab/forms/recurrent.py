"""Generalised symmetric self-attention (paper 003, Props. 4.1 and 4.2, conditions re-derived here).

Our text copy of Tomihari & Karakida lost the conditions (eqs. 11 and 13); an earlier reconstruction (value map
the symmetric part of a non-symmetric QK product) is false: dE/dt > 0 on some states. What we derive instead:

**Prop. 4.1 (single head, projected on the sphere).** Along ẋ_i = P_{x_i} Σ_j softmax_j(β x_iᵀAx_j) W x_j with
A = W_Q W_Kᵀ and W = W_V W_O, the energy E = −(1/2β) Σ_ij exp(β x_iᵀ A x_j) has ∇_{x_i}E = −½ Σ_j (e_ij A + e_ji Aᵀ)
x_j. If A = Aᵀ this is −A s_i with s_i = Σ_j e_ij x_j = Z_i Σ_j softmax_ij x_j, and with W = cA (c ≥ 0)

    dE/dt = −Σ_i (c / Z_i) (A s_i)ᵀ P_{x_i} (A s_i) ≤ 0        (P_{x_i} = I − x_i x_iᵀ is PSD).

Conversely, requiring uᵀ P_x M u ≥ 0 for all u and unit x (M = W A⁻¹) forces M x ∥ x for every x, so M = cI: for
this energy the condition is A = W_Q W_Kᵀ symmetric and W_V W_O = c A. W_Q and W_K may each be anything (neither
equal nor symmetric), A may be indefinite: that is the relaxation of "W_Q = W_K, W_V = I".

**Prop. 4.2 (H heads, no projection).** E = −(1/2β) Σ_h Σ_ij exp(β x_iᵀ A_h x_j) and ẋ_i = Σ_h Σ_j softmax^h_ij W_h x_j
give dE/dt = −Σ_i Σ_{h,h'} (1/Z^{h'}_i) (A_h s^h_i)ᵀ W_h' s^{h'}_i. With W_h = A_h symmetric and A_h A_h' = 0 for h ≠ h'
the cross terms vanish and dE/dt = −Σ_i Σ_h ‖A_h s^h_i‖² / Z^h_i ≤ 0. We build this from one orthogonal U = [U_1 … U_H]
(blocks of d_h = d/H columns): A_h = U_h Λ_h U_hᵀ, Λ_h symmetric, W_Q,h = U_h Λ_h, W_K,h = U_h: low-rank QK products
on orthogonal subspaces. (The paper states its U structure with two D × D/(2H) blocks per head; that split is
lost in our copy and ours uses one block per head.)

The catalog forms use the unnormalised kernel (the exact gradients); softmax divides token i (and head h) by
Z > 0, still a descent direction, which :func:`energy_rate` measures. Shapes: x (..., N, d).
"""
from __future__ import annotations

import math

import torch

from energylab._checks import check_count, check_dim, check_overflow, check_positive, check_same_dtype, check_tensor
from energylab.catalog import AttentionForm, Equation, register
from energylab.forms._common import heads_for, randn, unit_rows
from energylab.sphere import tangent_projection

# the chapter that derives this family's forms (a form derived elsewhere names its own)
CHAPTER = "09_jacobians"
# the Atlas (chapter 11) groups this module's forms under this title
FAMILY = "Sphere and symmetric self-attention"

__all__ = ["exp_energy", "sa_flow", "energy_rate", "generalised_symmetric_energy", "generalised_symmetric_update",
           "sample_generalised_symmetric", "multihead_symmetric_energy", "multihead_symmetric_update",
           "orthogonal_head_maps", "sample_multihead_symmetric"]


def exp_energy(x: torch.Tensor, A: torch.Tensor, beta) -> torch.Tensor:
    """E = −(1/2β) Σ_ij exp(β x_iᵀ A x_j) for any A (d, d), or the sum over heads for A (H, d, d).

    x (..., N, d) -> (...)."""
    _check_tokens(x)
    check_tensor("A", A, ndim=(2, 3))
    check_same_dtype(("x", x), ("A", A))
    if A.shape[-2:] != (x.shape[-1], x.shape[-1]):
        raise ValueError(f"A must have shape (d, d) or (H, d, d) with d = {x.shape[-1]} (x's last dim), "
                         f"got {tuple(A.shape)}")
    beta = check_positive("beta", beta)
    maps = A if A.dim() == 3 else A[None]
    scores = torch.einsum("...ia,hab,...jb->...hij", x, maps, x)
    energy = -torch.exp(beta * scores).sum((-1, -2, -3)) / (2 * beta)
    check_overflow("beta", beta, energy, "exp(beta x_iᵀA x_j)")
    return energy


def _check_tokens(x) -> None:
    """x must be tokens (..., N ≥ 1, d) with finite entries."""
    check_tensor("x", x, min_ndim=2, layout="(..., N, d)")
    check_count("x", x, -2)


def sa_flow(x: torch.Tensor, A: torch.Tensor, W_V: torch.Tensor, beta, project: bool = True) -> torch.Tensor:
    """ẋ_i = (P_{x_i}) Σ_h Σ_j softmax_j(β x_iᵀ A_h x_j) W_{V,h} x_j: softmax self-attention in continuous time.

    A (the score maps), W_V (the value maps): (d, d) for one head or (heads, d, d); ``project``: apply the tangent
    projection of each token (unit rows).
    """
    maps, values = (A, W_V) if A.dim() == 3 else (A[None], W_V[None])
    attn = torch.softmax(beta * torch.einsum("...ia,hab,...jb->...hij", x, maps, x), dim=-1)
    y = torch.einsum("...hij,hab,...jb->...ia", attn, values, x)
    return tangent_projection(x, y) if project else y


def energy_rate(x: torch.Tensor, A: torch.Tensor, W_V: torch.Tensor, beta, energy_A: torch.Tensor | None = None,
                project: bool = True) -> torch.Tensor:
    """dE/dt = ⟨∇E(x), ẋ⟩ along :func:`sa_flow`, E = :func:`exp_energy` with ``energy_A`` (default A).

    x (..., N, d) -> (...)."""
    x = x.detach().requires_grad_(True)
    E = exp_energy(x, A if energy_A is None else energy_A, beta)
    (grad,) = torch.autograd.grad(E.sum(), x)
    return (grad * sa_flow(x.detach(), A, W_V, beta, project)).sum((-1, -2))


# ------------------------------------------------------------------------ one head on the sphere (Prop. 4.1)
def _generalised_symmetric_map(x, W_Q, W_K, W_V):
    """Check x (..., N, d) and the maps (d, d) of Prop. 4.1; return A = W_Q W_Kᵀ."""
    _check_tokens(x)
    d = x.shape[-1]
    for name, w in (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V)):
        check_tensor(name, w, ndim=2)
        if w.shape != (d, d):
            raise ValueError(f"{name} must have shape ({d}, {d}) to match x's last dim, got {tuple(w.shape)}")
    check_same_dtype(("x", x), ("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V))
    A = W_Q @ W_K.T
    scale = A.abs().max().clamp_min(1)
    rtol = max(1e-5, 100 * torch.finfo(A.dtype).eps)  # 1e-5 in float32/64; float16's rounding is larger
    if not torch.allclose(A, A.T, rtol=rtol, atol=1e-10 * scale):
        raise ValueError("W_Q W_Kᵀ must be symmetric (Prop. 4.1)")
    if not torch.allclose(W_V, A, rtol=rtol, atol=1e-10 * scale):
        raise ValueError("W_V must equal W_Q W_Kᵀ (Prop. 4.1; c W_Q W_Kᵀ, c > 0, only rescales time)")
    return A


def generalised_symmetric_energy(x, W_Q, W_K, W_V, beta) -> torch.Tensor:
    """E = −(1/2β) Σ_ij exp(β x_iᵀ W_Q W_Kᵀ x_j) with W_Q W_Kᵀ = W_V symmetric (Prop. 4.1, our derivation)."""
    return exp_energy(x, _generalised_symmetric_map(x, W_Q, W_K, W_V), beta)


def generalised_symmetric_update(x, W_Q, W_K, W_V, beta) -> torch.Tensor:
    """P_{x_i} Σ_j exp(β x_iᵀ W_Q W_Kᵀ x_j) W_V x_j = −P_x ∇E (unnormalised single-head SA on the sphere)."""
    _generalised_symmetric_map(x, W_Q, W_K, W_V)
    beta = check_positive("beta", beta)
    kernel = torch.exp(beta * (x @ W_Q) @ (x @ W_K).transpose(-1, -2))  # (..., N, N): exp(β x_iᵀ W_Q W_Kᵀ x_j)
    y = kernel @ x @ W_V.T
    check_overflow("beta", beta, y, "exp(beta x_iᵀ W_Q W_Kᵀ x_j)")
    return tangent_projection(x, y)


def sample_generalised_symmetric(n_tokens, dim, generator=None, dtype=torch.float64):
    """Unit tokens, W_K = M (random, well conditioned), W_Q = S M⁻ᵀ with S symmetric: W_Q W_Kᵀ = S = W_V."""
    x = unit_rows(generator, dtype, n_tokens, dim)
    M = torch.eye(dim, dtype=dtype) + 0.3 * randn(generator, dtype, dim, dim) / math.sqrt(dim)
    B = randn(generator, dtype, dim, dim) / math.sqrt(dim)
    S = (B + B.T) / 2
    W_Q = S @ torch.linalg.inv(M).T
    return x, {"W_Q": W_Q, "W_K": M, "W_V": W_Q @ M.T, "beta": 0.5 + float(torch.rand((), generator=generator))}


# ------------------------------------------------------------------------ heads on orthogonal subspaces (Prop. 4.2)
def orthogonal_head_maps(U: torch.Tensor, Lam: torch.Tensor) -> torch.Tensor:
    """A_h = U_h Λ_h U_hᵀ (H, d, d) from U (d, d) orthogonal (column blocks U_h of d_h = d/H) and Λ (H, d_h, d_h)."""
    check_tensor("U", U, ndim=2)
    check_tensor("Lam", Lam, ndim=3)
    check_same_dtype(("U", U), ("Lam", Lam))
    d, (H, dh, dh2) = U.shape[0], Lam.shape
    if H < 1:
        raise ValueError(f"Lam must hold at least 1 head (H, d/H, d/H), got shape {tuple(Lam.shape)}")
    if U.shape != (d, d) or dh != dh2 or H * dh != d:
        raise ValueError(f"U must be (d, d) and Lam (H, d/H, d/H), got {tuple(U.shape)} and {tuple(Lam.shape)}")
    # 1e-10 in float64; float32/16 rounding of an orthogonal U is larger
    atol = max(1e-10, 100 * torch.finfo(U.dtype).eps)
    if not torch.allclose(U.T @ U, torch.eye(d, dtype=U.dtype), atol=atol):
        raise ValueError("U must be orthogonal (the head subspaces must be orthogonal, Prop. 4.2)")
    if not torch.allclose(Lam, Lam.transpose(-1, -2)):
        raise ValueError("Lam must be symmetric per head (W_V,h = A_h symmetric, Prop. 4.2)")
    blocks = U.reshape(d, H, dh).transpose(0, 1)  # (H, d, d_h)
    return blocks @ Lam @ blocks.transpose(-1, -2)


def multihead_symmetric_energy(x, U, Lam, beta) -> torch.Tensor:
    """E = −(1/2β) Σ_h Σ_ij exp(β x_iᵀ A_h x_j), A_h = U_h Λ_h U_hᵀ (Prop. 4.2, our construction)."""
    _check_multihead_tokens(x, U)
    return exp_energy(x, orthogonal_head_maps(U, Lam), beta)


def _check_multihead_tokens(x, U) -> None:
    _check_tokens(x)
    check_tensor("U", U, ndim=2)
    check_dim("x", x.shape[-1], U.shape[0], "last dimension (d, the size of U)")
    check_same_dtype(("x", x), ("U", U))


def multihead_symmetric_update(x, U, Lam, beta) -> torch.Tensor:
    """Σ_h Σ_j exp(β x_iᵀ A_h x_j) A_h x_j = −∇E.

    Unnormalised multi-head SA with W_Q,h = U_hΛ_h, W_K,h = U_h, W_V,h = A_h."""
    _check_multihead_tokens(x, U)
    beta = check_positive("beta", beta)
    maps = orthogonal_head_maps(U, Lam)
    kernel = torch.exp(beta * torch.einsum("...ia,hab,...jb->...hij", x, maps, x))
    y = torch.einsum("...hij,hab,...jb->...ia", kernel, maps, x)
    check_overflow("beta", beta, y, "exp(beta x_iᵀA_h x_j)")
    return y


def sample_multihead_symmetric(n_tokens, dim, generator=None, dtype=torch.float64):
    """Gaussian tokens / √d, U a random orthogonal matrix, Λ_h symmetric Gaussian / √d_h; H = heads_for(dim)."""
    H = heads_for(dim)
    dh = dim // H
    x = randn(generator, dtype, n_tokens, dim) / math.sqrt(dim)
    U = torch.linalg.qr(randn(generator, dtype, dim, dim))[0]
    B = randn(generator, dtype, H, dh, dh) / math.sqrt(dh)
    return x, {"U": U, "Lam": (B + B.transpose(-1, -2)) / 2,
               "beta": 0.5 + float(torch.rand((), generator=generator))}


register(AttentionForm(
    chapter=CHAPTER,
    name="generalised_symmetric_sa", paper="tomihari2025jacobians", kind="gradient", on_sphere=True,
    equation=Equation(r"E = -\frac{1}{2\beta}\sum_{ij} e^{\beta x_i^\top W_Q W_K^\top x_j},\ "
                      r"W_QW_K^\top = W_V = (W_QW_K^\top)^\top",
                      r"P_{x_i}\Big(\sum_j e^{\beta x_i^\top W_QW_K^\top x_j} W_V x_j\Big)"),
    energy=generalised_symmetric_energy, update=generalised_symmetric_update, sample=sample_generalised_symmetric,
    note="Prop. 4.1 with the condition re-derived here (our copy lost eq. 11): W_Q ≠ W_K allowed, their product "
    "symmetric and equal to the value map. Softmax SA rescales token i by 1/Z_i > 0: still a descent direction.",
))
register(AttentionForm(
    chapter=CHAPTER,
    name="multihead_symmetric_sa", paper="tomihari2025jacobians", kind="gradient", multi_head=True,
    equation=Equation(r"E = -\frac{1}{2\beta}\sum_h\sum_{ij} e^{\beta x_i^\top U_h\Lambda_hU_h^\top x_j}",
                      r"\sum_h\sum_j e^{\beta x_i^\top A_h x_j} A_h x_j,\ A_h = U_h\Lambda_hU_h^\top"),
    energy=multihead_symmetric_energy, update=multihead_symmetric_update, sample=sample_multihead_symmetric,
    note="Prop. 4.2 (our construction; the paper's two-block U split is lost in our copy): low-rank QK products on "
    "orthogonal head subspaces, W_V,h = A_h symmetric; without projection the cross-head terms vanish.",
))
