"""Modern Hopfield networks (Ramsauer et al. 2021): retrieval as descent on an energy; one family of the catalog.

The energy E(ξ) of a state against stored patterns, its operator −∇E (ξ + update is the retrieval / CCCP step,
i.e. cross-attention with the patterns as keys and values), the sampler and the ``register`` call.
Shapes: a state ξ (..., d) (one state or a batch), patterns X (N, d) as rows.
"""
from __future__ import annotations

import torch

from energylab.catalog import AttentionForm, Equation, register
from energylab.forms._common import check_hopfield, randn

# the chapter that derives this family's forms (a form derived elsewhere names its own)
CHAPTER = "03_hopfield_memories"
# the Atlas (chapter 11) groups this module's forms under this title
FAMILY = "Hopfield retrieval"

__all__ = ["hopfield_energy", "hopfield_update"]


def hopfield_energy(xi: torch.Tensor, X: torch.Tensor, beta) -> torch.Tensor:
    """E(ξ) = −β⁻¹ log Σ_i exp(β x_iᵀ ξ) + ½ ξᵀξ (Ramsauer et al. 2021, without the constant).

    xi: (..., d) state(s), X: (N, d) stored patterns x_i as rows  ->  (...).
    """
    beta = check_hopfield(xi, X, beta)
    lse = torch.logsumexp(beta * torch.einsum("...a,ia->...i", xi, X), dim=-1)
    return -lse / beta + 0.5 * xi.pow(2).sum(-1)


def hopfield_update(xi: torch.Tensor, X: torch.Tensor, beta) -> torch.Tensor:
    """−∇E(ξ) = X softmax(β Xᵀ ξ) − ξ, so ξ + update is the CCCP / retrieval step (Ramsauer et al. 2021).

    xi: (..., d), X: (N, d) patterns as rows  ->  (..., d).
    """
    beta = check_hopfield(xi, X, beta)
    p = torch.softmax(beta * torch.einsum("...a,ia->...i", xi, X), dim=-1)
    return torch.einsum("...i,ia->...a", p, X) - xi


def _sample_hopfield(n_tokens, dim, generator=None, dtype=torch.float64):
    """ξ (3, d), {"X": (N, d) Gaussian patterns, "beta" in [0.5, 1.5)}."""
    X = randn(generator, dtype, n_tokens, dim)
    return randn(generator, dtype, 3, dim), {"X": X, "beta": 0.5 + float(torch.rand((), generator=generator))}


# ----------------------------------------------------------------------------- the catalog
register(AttentionForm(
    chapter=CHAPTER,
    name="hopfield_retrieval", paper="ramsauer2021", kind="gradient",
    equation=Equation(r"E(\xi) = -\beta^{-1}\log\sum_i e^{\beta x_i^\top\xi} + \tfrac12\xi^\top\xi",
                      r"-\nabla E = X\,\mathrm{softmax}(\beta X^\top\xi) - \xi"),
    energy=lambda xi, X, beta: hopfield_energy(xi, X, beta).sum(),
    update=hopfield_update, sample=_sample_hopfield,
    note="Exact gradient; ξ + update is the CCCP step, i.e. cross-attention with the patterns as keys and values.",
))
