"""Energy functions: potentials E_i(z, h_i), free energies and the global energies of every attention form.

Shapes (book/notation.md): N tokens, d dimension, H heads, d_h = d / H. A query z has shape (..., d)
(one query or a batch of queries), the attended tokens are the rows of H (N, d), and W is (d, d).
Every function is differentiable with autograd and float64-safe; the operators that these energies
induce live in :mod:`energylab.operators`, the pairs are registered in :mod:`energylab.catalog`.

Free-energy part: paper 000 (Transformers as intrinsic optimizers), eqs. (2)-(4) and Theorems 1-3.
"""
from __future__ import annotations

import torch

from energylab._checks import check_count, check_dim, check_overflow, check_positive, check_tensor

__all__ = [
    "elastic_potentials",
    "dot_product_potentials",
    "boltzmann_weights",
    "free_energy_of_weights",
    "helmholtz_free_energy",
    "softmax_free_energy",
    "dot_product_free_energy",
    "check_query_tokens",
    "check_potentials",
    "linear_attention_energy",
    "check_heads",
    "multihead_elastic_potentials",
    "multihead_free_energy",
    "hopfield_energy",
    "expressive_potentials",
    "expressive_free_energy",
    "local_energies",
    "sphere_interaction_energy",
    "symmetric_attention_energy",
]


_NO_KEYS = "a softmax over zero keys is undefined"


def check_query_tokens(z, H, W) -> None:
    """Validate a query z (..., d), tokens H (N ≥ 1, d) and a square map W (d, d); errors name the argument."""
    check_tensor("z", z)
    if z.dim() < 1:
        raise ValueError(f"z must have at least 1 dim (..., d), got shape {tuple(z.shape)}")
    check_tensor("H", H, ndim=2)
    check_count("H", H, 0, why=_NO_KEYS)
    check_tensor("W", W, ndim=2)
    d = z.shape[-1]
    check_dim("H", H.shape[-1], d)
    if W.shape != (d, d):
        raise ValueError(f"W must have shape ({d}, {d}) to match z, got {tuple(W.shape)}")


def _mapped_tokens(H: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """The rows W h_i: (N, d)."""
    # (W h_i)_a = sum_b W_ab H_ib
    return torch.einsum("ab,ib->ia", W, H)


def elastic_potentials(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Elastic potentials E_i = ½‖z − W h_i‖² (paper 000, Theorem 1).

    z: (..., d), H: (N, d), W: (d, d)  ->  E: (..., N).
    """
    check_query_tokens(z, H, W)
    r = z.unsqueeze(-2) - _mapped_tokens(H, W)  # (..., N, d): r_i = z − W h_i
    return 0.5 * r.pow(2).sum(-1)


def dot_product_potentials(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Inner-product potentials E_i = −zᵀ W h_i (paper 000, Table 1 and Theorem 3).

    z: (..., d), H: (N, d), W: (d, d)  ->  E: (..., N).
    """
    check_query_tokens(z, H, W)
    # E_i = − sum_a z_a (W h_i)_a
    return -torch.einsum("...a,ia->...i", z, _mapped_tokens(H, W))


def check_potentials(E) -> None:
    """Validate potentials E (..., N) with N ≥ 1: a distribution over zero states is undefined."""
    check_tensor("E", E)
    check_count("E", E, -1, what="entry on its last dim", why=_NO_KEYS)


def boltzmann_weights(E: torch.Tensor, T) -> torch.Tensor:
    """Boltzmann weights p_i = exp(−E_i/T) / Z over the last dim (paper 000, Lemma 1).

    E: (..., N), N ≥ 1, T > 0 (a number or a tensor broadcastable to E[..., :1])  ->  p: (..., N).
    """
    check_potentials(E)
    T = check_positive("T", T)
    return torch.softmax(-E / T, dim=-1)


def free_energy_of_weights(p: torch.Tensor, E: torch.Tensor, T) -> torch.Tensor:
    """Free energy of an arbitrary distribution p: F = Σ p_i E_i + T Σ p_i log p_i = U − TS (paper 000, eq. 2).

    p, E: (..., N) with p on the simplex (0 log 0 = 0)  ->  F: (...).
    """
    check_tensor("p", p)
    check_potentials(E)
    T = check_positive("T", T)
    if p.shape != E.shape:
        raise ValueError(f"p must have the shape of E {tuple(E.shape)}, got {tuple(p.shape)}")
    if (p < 0).any():
        raise ValueError("p must be non-negative")
    internal_energy = (p * E).sum(-1)  # U = Σ_i p_i E_i
    neg_entropy = torch.special.xlogy(p, p).sum(-1)  # −S = Σ_i p_i log p_i
    return internal_energy + T * neg_entropy


def helmholtz_free_energy(E: torch.Tensor, T) -> torch.Tensor:
    """Helmholtz free energy F* = −T log Σ_i exp(−E_i/T) (paper 000, eq. 3), the minimum of eq. (2) over p.

    Computed with logsumexp, so it is finite for any finite E. E: (..., N), N ≥ 1  ->  F*: (...).
    """
    check_potentials(E)
    T = check_positive("T", T)
    return -T * torch.logsumexp(-E / T, dim=-1)


def softmax_free_energy(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """F* = −T log Σ_i exp(−½‖z − W h_i‖²/T) (paper 000, eq. 4). z: (..., d)  ->  (...) one value per query."""
    return helmholtz_free_energy(elastic_potentials(z, H, W), T)


def dot_product_free_energy(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """F̃* = −T log Σ_i exp(zᵀ W h_i / T), the dot-product free energy (paper 000, proof of Theorem 1).

    On the sphere ‖z‖ = ‖W h_i‖ = ρ it differs from F* by the constant ρ²: F* = F̃* + ρ².
    z: (..., d)  ->  (...).
    """
    return helmholtz_free_energy(dot_product_potentials(z, H, W), T)


# ----------------------------------------------------------------------------- more forms of paper 000
def linear_attention_energy(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """F* = −(T/2) Σ_i E_i² with E_i = −zᵀ W h_i (paper 000, Theorem 3, eq. 14). z: (..., d)  ->  (...)."""
    T = check_positive("T", T)
    return -0.5 * T * dot_product_potentials(z, H, W).pow(2).sum(-1)


def check_heads(z, H, W1, W2) -> None:
    """Validate multi-head maps W1, W2: (heads, d_h, d) acting on z (..., d) and tokens H (N ≥ 1, d)."""
    check_tensor("z", z)
    check_tensor("H", H, ndim=2)
    check_count("H", H, 0, why=_NO_KEYS)
    check_tensor("W1", W1, ndim=3)
    check_tensor("W2", W2, ndim=3)
    d = z.shape[-1]
    check_dim("H", H.shape[-1], d)
    check_dim("W1", W1.shape[-1], d)
    if W2.shape != W1.shape:
        raise ValueError(f"W2 must have the shape of W1 {tuple(W1.shape)}, got {tuple(W2.shape)}")


def multihead_elastic_potentials(z, H, W1, W2) -> torch.Tensor:
    """E_{i,h} = ½‖W_{1,h} z − W_{2,h} h_i‖² (paper 000, Theorem 2). z: (..., d)  ->  (..., heads, N)."""
    check_heads(z, H, W1, W2)
    q = torch.einsum("hca,...a->...hc", W1, z)  # q_h = W_{1,h} z: (..., heads, d_h)
    k = torch.einsum("hca,ia->hic", W2, H)  # k_{i,h} = W_{2,h} h_i: (heads, N, d_h)
    return 0.5 * (q.unsqueeze(-2) - k).pow(2).sum(-1)


def multihead_free_energy(z, H, W1, W2, T) -> torch.Tensor:
    """Average free energy F* = −(1/H) Σ_h T log Σ_i exp(−E_{i,h}/T) (paper 000, Theorem 2). -> (...)."""
    return helmholtz_free_energy(multihead_elastic_potentials(z, H, W1, W2), T).mean(-1)


# ----------------------------------------------------------------------------- modern Hopfield (Ramsauer et al.)
def hopfield_energy(xi: torch.Tensor, X: torch.Tensor, beta) -> torch.Tensor:
    """E(ξ) = −β⁻¹ log Σ_i exp(β x_iᵀ ξ) + ½ ξᵀξ (Ramsauer et al. 2021, without the constant).

    xi: (..., d) state(s), X: (N, d) stored patterns x_i as rows  ->  (...).
    """
    check_tensor("xi", xi)
    check_tensor("X", X, ndim=2)
    check_count("X", X, 0, what="pattern", why=_NO_KEYS)
    check_dim("X", X.shape[-1], xi.shape[-1])
    beta = check_positive("beta", beta)
    lse = torch.logsumexp(beta * torch.einsum("...a,ia->...i", xi, X), dim=-1)
    return -lse / beta + 0.5 * xi.pow(2).sum(-1)


# ----------------------------------------------------------------------------- expressive attention (paper 001)
def _squared_scores(s: torch.Tensor) -> torch.Tensor:
    """s², clamped at the largest finite value: where s² overflows, s²/(1+s²) is then exactly 1 (not inf/inf)."""
    return (s * s).clamp_max(torch.finfo(s.dtype).max)


def expressive_potentials(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """E_i = −T log(s_i² / (1 + s_i²)), s_i = zᵀ W h_i: the potentials whose Boltzmann weights are EA's weights.

    exp(−E_i/T) = s_i²/(1+s_i²), so boltzmann_weights(E, T) = expressive_weights(s) exactly (paper 001).
    z: (..., d)  ->  (..., N); +inf where s_i = 0 (that token gets weight 0), 0 where s_i² overflows.
    """
    T = check_positive("T", T)
    s = -dot_product_potentials(z, H, W)
    # s² formed twice, as autograd has always seen it (one shared node would change gradients in the last bit)
    return -T * (torch.log(_squared_scores(s)) - torch.log1p(_squared_scores(s)))


def expressive_free_energy(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """F_EA = −T log Σ_i s_i²/(1 + s_i²), the Helmholtz free energy of :func:`expressive_potentials`. -> (...).

    +inf for a query whose scores s_i = zᵀW h_i are all zero (exp(−F_EA/T) = Σ_i w_i = 0 there).
    """
    T = check_positive("T", T)
    s = -dot_product_potentials(z, H, W)
    return -T * torch.log((_squared_scores(s) / (1 + _squared_scores(s))).sum(-1))  # s² twice: see above


# ----------------------------------------------------------------------------- local energies (paper 002)
def local_energies(x: torch.Tensor, context: torch.Tensor, J: torch.Tensor, lam) -> torch.Tensor:
    """e_i = −(1/λ) log Σ_{j≠i} exp(λ x_iᵀ J_ij x_j) (D'Amico & Negri, eq. 4, with the scale λ of their code).

    x: (..., N, d) the tokens x_i whose energies these are; context: (..., N, d) the tokens x_j they see
    (pass ``x.detach()`` to differentiate each e_i in its own token only, as the paper does);
    J: (N, N, d, d) position-dependent couplings (J_ii is ignored)  ->  (..., N). Needs N ≥ 2 tokens.
    """
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
    logits = lam * torch.einsum("...ia,ijab,...jb->...ij", x, J, context)  # λ x_iᵀ J_ij x_j
    off_diag = ~torch.eye(n, dtype=torch.bool, device=x.device)
    return -torch.logsumexp(logits.masked_fill(~off_diag, float("-inf")), dim=-1) / lam


# ----------------------------------------------------------------------------- tokens on the sphere
def sphere_interaction_energy(x: torch.Tensor, beta) -> torch.Tensor:
    """E_β = (1/(2βn²)) Σ_ij exp(β⟨x_i, x_j⟩) (Geshkovski et al. 2023, Q = K = V = I). x: (..., n, d) -> (...).

    The unnormalised dynamics (USA) is the tangent gradient *ascent* of E_β, up to the time scale n.
    Where exp(β⟨x_i, x_j⟩) overflows the dtype (β ≳ 709 in float64 on the unit sphere) a ValueError names beta.
    """
    check_tensor("x", x)
    check_count("x", x, -2)
    beta = check_positive("beta", beta)
    n = x.shape[-2]
    gram = torch.einsum("...ia,...ja->...ij", x, x)
    energy = torch.exp(beta * gram).sum((-1, -2)) / (2 * beta * n * n)
    check_overflow("beta", beta, energy, "exp(beta⟨x_i, x_j⟩)")
    return energy


def symmetric_attention_energy(x: torch.Tensor, A: torch.Tensor, beta) -> torch.Tensor:
    """E = −(1/(2β)) Σ_ij exp(β x_iᵀ A x_j) with A = Aᵀ (Tomihari & Karakida, Prop. 4.1, symmetric case).

    x: (..., N, d), A: (d, d) symmetric  ->  (...). Where exp(β x_iᵀA x_j) overflows a ValueError names beta.
    """
    check_tensor("x", x)
    check_count("x", x, -2)
    check_tensor("A", A, ndim=2)
    beta = check_positive("beta", beta)
    d = x.shape[-1]
    if A.shape != (d, d):
        raise ValueError(f"A must have shape ({d}, {d}), got {tuple(A.shape)}")
    if not torch.allclose(A, A.T):
        raise ValueError("A must be symmetric (W_V = A = Aᵀ is the symmetric case)")
    scores = torch.einsum("...ia,ab,...jb->...ij", x, A, x)
    energy = -torch.exp(beta * scores).sum((-1, -2)) / (2 * beta)
    check_overflow("beta", beta, energy, "exp(beta x_iᵀA x_j)")
    return energy

