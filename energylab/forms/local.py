"""Local energies of bare self-attention (paper 002, D'Amico & Negri 2024); one family of the catalog.

Each token x_i has its own local energy e_i against the other tokens (its context); the self-attention update is
−∂e_i/∂x_i with the context held fixed. The trained attractor network on these formulas is
:mod:`energylab.models.attractor`. Shapes: tokens x, context (..., N, d), couplings J (N, N, d, d).
"""
from __future__ import annotations

import torch

from energylab._checks import check_count, check_positive, check_same_dtype, check_tensor
from energylab.catalog import AttentionForm, Equation, register
from energylab.forms._common import randn, unit_rows
from energylab.forms.free_energy import dot_product_weights

# the chapter that derives this family's forms (a form derived elsewhere names its own)
CHAPTER = "07_attractor_networks"
# the Atlas (chapter 11) groups this module's forms under this title
FAMILY = "Local energies"

__all__ = ["local_energies", "local_attention_update"]


def _check_local(x, context, J, lam):
    """Validate tokens x (..., N ≥ 2, d), a context of the same shape, J (N, N, d, d) and lam > 0; returns lam."""
    check_tensor("x", x)
    check_count("x", x, -2, minimum=2, why="each e_i is a softmax over the other tokens j ≠ i")
    check_tensor("context", context)
    check_tensor("J", J, ndim=4)
    lam = check_positive("lam", lam)
    if context.shape != x.shape:
        raise ValueError(f"context must have the shape of x {tuple(x.shape)}, got {tuple(context.shape)}")
    n, d = x.shape[-2:]
    if J.shape != (n, n, d, d):
        raise ValueError(f"J must have shape ({n}, {n}, {d}, {d}), got {tuple(J.shape)}")
    check_same_dtype(("x", x), ("context", context), ("J", J))
    return lam


def local_energies(x: torch.Tensor, context: torch.Tensor, J: torch.Tensor, lam) -> torch.Tensor:
    """e_i = −(1/λ) log Σ_{j≠i} exp(λ x_iᵀ J_ij x_j) (D'Amico & Negri, eq. 4, with the scale λ of their code).

    x: (..., N, d) the tokens x_i whose energies these are; context: (..., N, d) the tokens x_j they see
    (pass ``x.detach()`` to differentiate each e_i in its own token only, as the paper does);
    J: (N, N, d, d) position-dependent couplings (J_ii is ignored)  ->  (..., N). Needs N ≥ 2 tokens.
    """
    lam = _check_local(x, context, J, lam)
    n = x.shape[-2]
    logits = lam * torch.einsum("...ia,ijab,...jb->...ij", x, J, context)  # λ x_iᵀ J_ij x_j
    off_diag = ~torch.eye(n, dtype=torch.bool, device=x.device)
    return -torch.logsumexp(logits.masked_fill(~off_diag, float("-inf")), dim=-1) / lam


def local_attention_update(x: torch.Tensor, J: torch.Tensor, lam, context: torch.Tensor | None = None) -> torch.Tensor:
    """−∂e_i/∂x_i = Σ_{j≠i} α_ij J_ij c_j, α_ij = softmax_{j≠i}(λ x_iᵀ J_ij c_j) (D'Amico & Negri, eqs. 3-4).

    Each token descends its own local energy with the other tokens c_j held fixed; with the context c = x
    (the default) this is self-attention with value map J_ij. x, context: (..., N, d), J: (N, N, d, d).
    """
    context = x if context is None else context
    lam = _check_local(x, context, J, lam)
    n = x.shape[-2]
    # (J_ij c_j)_a is shared by the logits and the output: form it once, (..., N, N, d). Two-operand einsums
    # also avoid the slow contraction order torch picks for the three-operand version (~10x here).
    Jc = torch.einsum("ijab,...jb->...ija", J, context)
    logits = lam * torch.einsum("...ia,...ija->...ij", x, Jc)
    off_diag = ~torch.eye(n, dtype=torch.bool, device=x.device)
    alpha = dot_product_weights(logits, off_diag)
    return torch.einsum("...ij,...ija->...ia", alpha, Jc)


def _sample_local(n_tokens, dim, generator=None, dtype=torch.float64):
    """x (N, d) on the unit sphere, {"J": (N, N, d, d) Gaussian / d, "lam": 2, "context": a copy of x}."""
    x = unit_rows(generator, dtype, n_tokens, dim)
    J = randn(generator, dtype, n_tokens, n_tokens, dim, dim) / dim
    return x, {"J": J, "lam": 2.0, "context": x.clone()}


# ----------------------------------------------------------------------------- the catalog
register(AttentionForm(
    chapter=CHAPTER,
    name="local_self_attention", paper="damico2024attractor", kind="gradient",
    equation=Equation(r"\sum_i e_i,\ e_i = -\lambda^{-1}\log\sum_{j\ne i} e^{\lambda x_i^\top J_{ij} c_j}",
                      r"-\partial e_i/\partial x_i = \sum_{j\ne i}\alpha_{ij} J_{ij} c_j"),
    energy=lambda x, J, lam, context: local_energies(x, context, J, lam).sum(),
    update=local_attention_update, sample=_sample_local, min_tokens=2,
    note="Exact gradient of each local energy in its own token, the others (context c) held fixed; at c = x "
    "it is self-attention with value map J_ij. Σ_i e_i with c = x moving too is not what it descends.",
))
