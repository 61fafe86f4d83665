"""Free energies of paper 000 and the attention they induce by gradient descent: one family of the catalog.

Paper 000 (*Transformers as intrinsic optimizers*), eqs. (1)-(4), Theorems 1-3: the potentials E_i of a query
against its tokens, their Boltzmann weights and free energies (elastic F*, dot-product F̃*, linear, multi-head),
the operators −∇F* (one step of each is softmax, linear or multi-head attention), the softmax weights of raw
scores, the samplers of valid instances and the ``register`` calls. The Newton forms of the same paper (Att2nd,
MHA2nd and their first-order versions) are in :mod:`energylab.forms.newton`.

Shapes (book/notation.md): N tokens, d dimension, d_h = d / heads. A query z has shape (..., d) (one query or a
batch of queries), the attended tokens are the rows of H (N, d), W is (d, d) and multi-head maps W1, W2 are
(heads, d_h, d): H is the token matrix here, so a head count is written ``heads``. An operator returns the
*direction* of one step; a layer is then z + η · update.
"""
from __future__ import annotations

import torch

from energylab._checks import (
    check_count,
    check_dim,
    check_int,
    check_positive,
    check_same_dtype,
    check_simplex,
    check_tensor,
)
from energylab.catalog import AttentionForm, Equation, register
from energylab.forms._common import (
    NO_KEYS,
    check_query_tokens,
    check_scores_mask,
    heads_for,
    mapped_tokens,
    randn,
    temperature,
    unit_rows,
    well_conditioned,
)

# the chapter that derives this family's forms (a form derived elsewhere names its own)
CHAPTER = "01_free_energy"
# the Atlas (chapter 11) groups this module's forms under this title
FAMILY = "Free energies and Newton forms"

__all__ = [
    "elastic_potentials",
    "dot_product_potentials",
    "check_potentials",
    "boltzmann_weights",
    "free_energy_of_weights",
    "helmholtz_free_energy",
    "softmax_free_energy",
    "dot_product_free_energy",
    "linear_attention_energy",
    "check_heads",
    "multihead_elastic_potentials",
    "multihead_free_energy",
    "dot_product_weights",
    "softmax_free_energy_update",
    "dot_product_free_energy_update",
    "attention_step",
    "linear_attention_update",
    "head_queries_keys",
    "multihead_free_energy_update",
    "sample_sphere_tokens",
    "sample_free_tokens",
    "sample_heads",
]


# ----------------------------------------------------------------------------- potentials and free energies
def elastic_potentials(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Elastic potentials E_i = ½‖z − W h_i‖² (paper 000, Theorem 1).

    z: (..., d), H: (N, d), W: (d, d)  ->  E: (..., N).
    """
    check_query_tokens(z, H, W)
    r = z.unsqueeze(-2) - mapped_tokens(H, W)  # (..., N, d): r_i = z − W h_i
    return 0.5 * r.pow(2).sum(-1)


def dot_product_potentials(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Inner-product potentials E_i = −zᵀ W h_i (paper 000, Table 1 and Theorem 3).

    z: (..., d), H: (N, d), W: (d, d)  ->  E: (..., N).
    """
    check_query_tokens(z, H, W)
    # E_i = − sum_a z_a (W h_i)_a
    return -torch.einsum("...a,ia->...i", z, mapped_tokens(H, W))


def check_potentials(E) -> None:
    """Validate potentials E (..., N) with N ≥ 1: a distribution over zero states is undefined."""
    check_tensor("E", E)
    check_count("E", E, -1, what="entry on its last dim", why=NO_KEYS)


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
    check_simplex("p", p)
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


def linear_attention_energy(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """F* = −(T/2) Σ_i E_i² with E_i = −zᵀ W h_i (paper 000, Theorem 3, eq. 14). z: (..., d)  ->  (...)."""
    T = check_positive("T", T)
    return -0.5 * T * dot_product_potentials(z, H, W).pow(2).sum(-1)


def check_heads(z, H, W1, W2) -> None:
    """Validate multi-head maps W1, W2: (heads, d_h, d) acting on z (..., d) and tokens H (N ≥ 1, d)."""
    check_tensor("z", z)
    check_tensor("H", H, ndim=2)
    check_count("H", H, 0, why=NO_KEYS)
    check_tensor("W1", W1, ndim=3)
    check_tensor("W2", W2, ndim=3)
    check_count("W1", W1, 0, what="head", why="a multi-head form needs H ≥ 1 heads")
    d = z.shape[-1]
    check_dim("H", H.shape[-1], d)
    check_dim("W1", W1.shape[-1], d)
    if W2.shape != W1.shape:
        raise ValueError(f"W2 must have the shape of W1 {tuple(W1.shape)}, got {tuple(W2.shape)}")
    check_same_dtype(("z", z), ("H", H), ("W1", W1), ("W2", W2))


def multihead_elastic_potentials(z, H, W1, W2) -> torch.Tensor:
    """E_{i,h} = ½‖W_{1,h} z − W_{2,h} h_i‖² (paper 000, Theorem 2). z: (..., d)  ->  (..., heads, N)."""
    check_heads(z, H, W1, W2)
    q = torch.einsum("hca,...a->...hc", W1, z)  # q_h = W_{1,h} z: (..., heads, d_h)
    k = torch.einsum("hca,ia->hic", W2, H)  # k_{i,h} = W_{2,h} h_i: (heads, N, d_h)
    return 0.5 * (q.unsqueeze(-2) - k).pow(2).sum(-1)


def multihead_free_energy(z, H, W1, W2, T) -> torch.Tensor:
    """Average free energy F* = −(1/H) Σ_h T log Σ_i exp(−E_{i,h}/T) (paper 000, Theorem 2). -> (...)."""
    return helmholtz_free_energy(multihead_elastic_potentials(z, H, W1, W2), T).mean(-1)


# ----------------------------------------------------------------------------- softmax weights of raw scores
def dot_product_weights(scores: torch.Tensor, mask: torch.Tensor | None = None, beta=1.0) -> torch.Tensor:
    """Dot-product attention weights a_mk = exp(β s_mk) / Σ_k' exp(β s_mk') over the allowed k (paper 001, DPA).

    scores: (..., M, N) raw scores s_mk = q_mᵀ k_k; mask: boolean, broadcastable to scores, True where
    attention is allowed (a causal mask is ``torch.ones(N, N, dtype=bool).tril()``); beta > 0.
    Returns (..., M, N), each row summing to 1 over its allowed entries. A row with no allowed entry (fully
    masked) has no distribution to return: it gets zero weights, and zero gradient (never NaN).
    """
    check_scores_mask(scores, mask)
    beta = check_positive("beta", beta)
    if mask is None:
        return _dot_product_weights(scores, mask, beta)
    # a fully masked row keeps its (finite) scores so that its softmax stays finite, then is zeroed; other rows
    # are untouched (their masked entries are exactly 0 already), so their values and gradients do not change
    keep = mask | ~mask.any(-1, keepdim=True)
    return _dot_product_weights(scores, keep, beta).masked_fill(~mask, 0.0)


def _dot_product_weights(scores, mask=None, beta=1.0):
    logits = scores if beta == 1.0 else beta * scores
    if mask is not None:
        logits = logits.masked_fill(~mask, float("-inf"))
    return torch.softmax(logits, dim=-1)


# ----------------------------------------------------------------------------- operators: −∇F*
def softmax_free_energy_update(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """−∇_z F* = h̄ − z with h̄ = Σ_i p_i W h_i, p = Boltzmann weights of E_i = ½‖z − W h_i‖² (paper 000, eq. 8).

    A step z + η(h̄ − z) = (1 − η) z + η h̄ is eq. (8). z: (..., d)  ->  (..., d).
    """
    p = boltzmann_weights(elastic_potentials(z, H, W), T)  # (..., N)
    h_bar = torch.einsum("...i,ia->...a", p, mapped_tokens(H, W))  # h̄ = Σ_i p_i W h_i
    return h_bar - z


def dot_product_free_energy_update(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """−∇_z F̃* = Σ_i p_i W h_i with p_i ∝ exp(zᵀ W h_i / T) (paper 000, proof of Theorem 1).

    Chain rule: F̃* = −T log Σ_i exp(zᵀW h_i/T) gives ∇_z F̃* = −T · (1/T) Σ_i p_i W h_i = −Σ_i p_i W h_i.
    One descent step of rate η is therefore attention (eq. 1) with W_QᵀW_K = W and **W_V = η W**. The paper's
    proof writes W_V = ηT W because it drops the inner factor 1/T when differentiating; with the temperature
    absorbed into learnable weights the conclusion (attention = one gradient step) is unchanged.
    z: (..., d)  ->  (..., d).
    """
    p = boltzmann_weights(dot_product_potentials(z, H, W), T)  # (..., N)
    return torch.einsum("...i,ia->...a", p, mapped_tokens(H, W))


def attention_step(z: torch.Tensor, H: torch.Tensor, W_QK: torch.Tensor, W_V: torch.Tensor, T) -> torch.Tensor:
    """Atten(z) = z + Σ_i softmax_i(zᵀ W_QK h_i / T) W_V h_i (paper 000, eq. 1, with W_QK = W_QᵀW_K).

    z: (..., d), H: (N, d), W_QK, W_V: (d, d)  ->  (..., d).
    """
    check_query_tokens(z, H, W_QK)
    check_query_tokens(z, H, W_V)
    p = boltzmann_weights(dot_product_potentials(z, H, W_QK), T)  # softmax_i(zᵀW_QK h_i / T)
    return z + torch.einsum("...i,ia->...a", p, mapped_tokens(H, W_V))


def linear_attention_update(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """−∇_z F* = T Σ_i (zᵀ W h_i) W h_i for F* = −(T/2) Σ_i (zᵀW h_i)² (paper 000, Theorem 3).

    A step of rate η is linear attention (eq. 13) with W_QᵀW_K = W and W_V = ηT W, as the paper states
    (here the factor T is genuine: it multiplies the energy). z: (..., d)  ->  (..., d).
    """
    T = check_positive("T", T)
    scores = -dot_product_potentials(z, H, W)  # (..., N): zᵀ W h_i
    return T * torch.einsum("...i,ia->...a", scores, mapped_tokens(H, W))


def head_queries_keys(z, H, W1, W2, T, potential: str = "elastic"):
    """Per-head queries q_h = W_{1,h} z (..., heads, 1, d_h), keys k_{i,h} = W_{2,h} h_i (heads, N, d_h), weights.

    weights (..., heads, 1, N): Boltzmann weights of ½‖q_h − k_{i,h}‖² (``potential="elastic"``, paper 000 Theorem 2)
    or of −q_hᵀk_{i,h} (``"dot"``, the MHA2nd1st layer), at temperature T. Validates z, H, W1, W2 and T.
    """
    check_heads(z, H, W1, W2)
    q = torch.einsum("hca,...a->...hc", W1, z).unsqueeze(-2)  # (..., heads, 1, d_h)
    k = torch.einsum("hca,ia->hic", W2, H)  # (heads, N, d_h)
    if potential == "elastic":
        weights = boltzmann_weights(0.5 * (q - k).pow(2).sum(-1), T).unsqueeze(-2)  # (..., heads, 1, N)
    elif potential == "dot":
        weights = boltzmann_weights(-(q @ k.transpose(-1, -2)), T)
    else:
        raise ValueError(f"potential must be 'elastic' or 'dot', got {potential!r}")
    return q, k, weights


def multihead_free_energy_update(z, H, W1, W2, T) -> torch.Tensor:
    """−∇_z F* = −(1/heads) Σ_h W_{1,h}ᵀ (q_h − k̄_h) for the average free energy (paper 000, Theorem 2).

    z: (..., d), H: (N, d), W1, W2: (heads, d_h, d)  ->  (..., d).
    """
    q, k, weights = head_queries_keys(z, H, W1, W2, T, "elastic")
    g = (q - weights @ k).squeeze(-2)  # (..., heads, d_h): q_h − k̄_h
    return -torch.einsum("hca,...hc->...a", W1, g) / W1.shape[0]


# ----------------------------------------------------------------------------- samplers
def sample_sphere_tokens(n_tokens: int, dim: int, generator=None, dtype=torch.float64, rho: float = 1.5):
    """z and tokens with ‖z‖ = ‖W h_i‖ = ρ for all i (the hypothesis of paper 000, Theorem 1).

    Returns (z (3, d), {"H": (N, d), "W": (d, d), "T": float}).
    """
    n_tokens, dim = check_int("n_tokens", n_tokens, minimum=1), check_int("dim", dim, minimum=1)
    W = well_conditioned(generator, dtype, dim)
    targets = rho * unit_rows(generator, dtype, n_tokens, dim)  # the W h_i, on the sphere
    H = torch.linalg.solve(W, targets.T).T  # h_i = W⁻¹ (ρ u_i)
    z = rho * unit_rows(generator, dtype, 3, dim)
    return z, {"H": H, "W": W, "T": temperature(generator, dtype)}


def sample_free_tokens(n_tokens, dim, generator=None, dtype=torch.float64, token_scale: float = 1.0):
    """Unconstrained z (3, d), {"H": (N, d) scaled by token_scale, "W": (d, d) well conditioned, "T": float}."""
    W = well_conditioned(generator, dtype, dim)
    H = token_scale * randn(generator, dtype, n_tokens, dim)
    z = randn(generator, dtype, 3, dim)
    return z, {"H": H, "W": W, "T": temperature(generator, dtype)}


def sample_heads(n_tokens, dim, generator=None, dtype=torch.float64, orthogonal: bool = False):
    """z (3, d), {"H": (N, d), "W1", "W2": (heads, d_h, d), "T"} with heads = heads_for(dim).

    orthogonal: the rows of all W_{1,h} together form a rotation (where MHA2nd is exact Newton).
    """
    heads = heads_for(dim)
    if orthogonal:
        W1 = torch.linalg.qr(randn(generator, dtype, dim, dim))[0]
    else:
        W1 = well_conditioned(generator, dtype, dim)
    W1 = W1.reshape(heads, dim // heads, dim)  # (heads, d_h, d)
    W2 = well_conditioned(generator, dtype, dim).reshape(heads, dim // heads, dim)
    H = 0.4 * randn(generator, dtype, n_tokens, dim)
    z = randn(generator, dtype, 3, dim)
    return z, {"H": H, "W1": W1, "W2": W2, "T": temperature(generator, dtype)}


# ----------------------------------------------------------------------------- the catalog
register(AttentionForm(
    chapter=CHAPTER,
    name="softmax_free_energy", paper="energyprinciple2025", kind="gradient",
    equation=Equation(r"F^* = -T\log\sum_i e^{-\|z - W h_i\|^2/2T}",
                      r"-\nabla_z F^* = \bar h - z,\quad \bar h = \sum_i p_i W h_i"),
    energy=lambda z, H, W, T: softmax_free_energy(z, H, W, T).sum(),
    update=softmax_free_energy_update, sample=sample_sphere_tokens,
    note="Exact gradient. On the sphere ‖z‖ = ‖W h_i‖ = ρ, F* = F̃* + ρ², so one step is softmax attention "
    "(Theorem 1, with W_V = ηW; the paper's ηT comes from a dropped 1/T).",
))
register(AttentionForm(
    chapter=CHAPTER,
    name="dot_product_free_energy", paper="energyprinciple2025", kind="gradient",
    equation=Equation(r"\tilde F^* = -T\log\sum_i e^{z^\top W h_i/T}",
                      r"-\nabla_z \tilde F^* = \sum_i \mathrm{softmax}_i(z^\top W h_i/T)\, W h_i"),
    energy=lambda z, H, W, T: dot_product_free_energy(z, H, W, T).sum(),
    update=dot_product_free_energy_update, sample=sample_free_tokens,
    note="Exact gradient for any z; attention (eq. 1) is z + η·update with W_QᵀW_K = W, W_V = ηW.",
))
register(AttentionForm(
    chapter="02_attention_as_descent",  # chapter 2 derives it
    name="linear_attention", paper="energyprinciple2025", kind="gradient",
    equation=Equation(r"F^* = -\tfrac{T}{2}\sum_i (z^\top W h_i)^2",
                      r"-\nabla_z F^* = T\sum_i (z^\top W h_i)\, W h_i"),
    energy=lambda z, H, W, T: linear_attention_energy(z, H, W, T).sum(),
    update=linear_attention_update, sample=sample_free_tokens,
    note="Exact gradient (Theorem 3): linear attention with W_V = ηT W.",
))
register(AttentionForm(
    chapter="02_attention_as_descent",  # chapter 2 derives it
    name="multihead_free_energy", multi_head=True, paper="energyprinciple2025", kind="gradient",
    equation=Equation(r"F^* = -\tfrac1H\sum_h T\log\sum_i e^{-\|W_{1,h}z - W_{2,h}h_i\|^2/2T}",
                      r"-\nabla_z F^* = -\tfrac1H\sum_h W_{1,h}^\top(q_h - \bar k_h)"),
    energy=lambda z, H, W1, W2, T: multihead_free_energy(z, H, W1, W2, T).sum(),
    update=multihead_free_energy_update, sample=sample_heads,
    note="Exact gradient (Theorem 2); on the spheres ‖q_h‖ = ‖k_{i,h}‖ = ρ a step is multi-head attention.",
))
