"""Closed-form operators: the update each energy of :mod:`energylab.energies` induces.

An operator returns the *direction* of one step (−∇E, a Newton direction, or an approximation of one);
a layer is then x + η · update. Shapes as in :mod:`energylab.energies`: z (..., d), H (N, d), W (d, d).
The catalog (:mod:`energylab.catalog`) checks every operator against autograd on its energy.
"""
from __future__ import annotations

import torch

from energylab._checks import (
    _value_checks_off,
    check_count,
    check_nonzero_rows,
    check_overflow,
    check_positive,
    check_tensor,
)
from energylab.energies import (
    _mapped_tokens,
    _squared_scores,
    boltzmann_weights,
    check_heads,
    check_query_tokens,
    dot_product_potentials,
    elastic_potentials,
    local_energies,
    symmetric_attention_energy,
)
from energylab.kernels import (  # noqa: F401 (re-exported)
    expressive_attention_values,
    newton_first_order_direction,
    ridge_inverse,
    row_blocks,
)

__all__ = [
    "dot_product_weights",
    "expressive_weights",
    "expressive_attention_values",
    "softmax_free_energy_update",
    "dot_product_free_energy_update",
    "attention_step",
    "tangent_projection",
    "sphere_step",
    "linear_attention_update",
    "att2nd_update",
    "att2nd1st_update",
    "newton_first_order_direction",
    "ridge_inverse",
    "row_blocks",
    "multihead_free_energy_update",
    "mha2nd_update",
    "mha2nd1st_update",
    "hopfield_update",
    "expressive_free_energy_update",
    "expressive_attention_step",
    "local_attention_update",
    "sphere_interaction_update",
    "symmetric_attention_update",
]


# ----------------------------------------------------------------------------- attention weights from scores
def _check_scores_mask(scores, mask) -> None:
    check_tensor("scores", scores)
    check_count("scores", scores, -1, what="key on its last dim", why="a softmax over zero keys is undefined")
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise TypeError("mask must be a boolean tensor (True where attention is allowed)")
        try:
            torch.broadcast_shapes(mask.shape, scores.shape)
        except RuntimeError:
            raise ValueError(
                f"mask shape {tuple(mask.shape)} does not broadcast to scores shape {tuple(scores.shape)}"
            ) from None


def dot_product_weights(scores: torch.Tensor, mask: torch.Tensor | None = None, beta=1.0) -> torch.Tensor:
    """Dot-product attention weights a_mk = exp(β s_mk) / Σ_k' exp(β s_mk') over the allowed k (paper 001, DPA).

    scores: (..., M, N) raw scores s_mk = q_mᵀ k_k; mask: boolean, broadcastable to scores, True where
    attention is allowed (a causal mask is ``torch.ones(N, N, dtype=bool).tril()``); beta > 0.
    Returns (..., M, N), each row summing to 1 over its allowed entries. A row with no allowed entry (fully
    masked) has no distribution to return: it gets zero weights, and zero gradient (never NaN).
    """
    _check_scores_mask(scores, mask)
    beta = check_positive("beta", beta)
    if mask is None:
        return _dot_product_weights(scores, mask, beta)
    # a fully masked row keeps its (finite) scores so that its softmax stays finite, then is zeroed; other rows
    # are untouched (their masked entries are exactly 0 already), so their values and gradients do not change
    keep = mask | ~mask.any(-1, keepdim=True)
    return _dot_product_weights(scores, keep, beta).masked_fill(~mask, 0.0)


def _dot_product_weights(scores, mask=None, beta=1.0):
    """:func:`dot_product_weights` without validation (for layers' hot paths)."""
    logits = scores if beta == 1.0 else beta * scores
    if mask is not None:
        logits = logits.masked_fill(~mask, float("-inf"))
    return torch.softmax(logits, dim=-1)


def expressive_weights(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Expressive-attention weights a_mk = s_mk² / (1 + s_mk²) / N_m (paper 001, EA), N_m the (masked) row sum.

    The weight of a score is even in s: anti-aligned query/key pairs attend as strongly as aligned ones.
    scores: (..., M, N); mask as in :func:`dot_product_weights`. A row whose allowed scores are all exactly
    zero (or that is fully masked) has no weight to normalise and returns zeros (the denominator is clamped
    at the smallest normal); we chose zeros over uniform weights because s → 0 has no unique limit (along
    s = t·u the weights tend to u_k²/Σ_j u_j²) and the fused layer kernel does the same. A score whose square
    overflows gets the raw weight 1, its limit.
    """
    _check_scores_mask(scores, mask)
    return _expressive_weights(scores, mask)


def _expressive_weights(scores, mask=None):
    """:func:`expressive_weights` without validation (for layers' hot paths)."""
    s2 = _squared_scores(scores)
    w = s2 / (1 + s2)  # z²/(1+z²) in [0, 1]
    if mask is not None:
        w = w.masked_fill(~mask, 0.0)
    return w / w.sum(-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)


# ----------------------------------------------------------------------------- paper 000: free energies
def softmax_free_energy_update(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """−∇_z F* = h̄ − z with h̄ = Σ_i p_i W h_i, p = Boltzmann weights of E_i = ½‖z − W h_i‖² (paper 000, eq. 8).

    A step z + η(h̄ − z) = (1 − η) z + η h̄ is eq. (8). z: (..., d)  ->  (..., d).
    """
    p = boltzmann_weights(elastic_potentials(z, H, W), T)  # (..., N)
    h_bar = torch.einsum("...i,ia->...a", p, _mapped_tokens(H, W))  # h̄ = Σ_i p_i W h_i
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
    return torch.einsum("...i,ia->...a", p, _mapped_tokens(H, W))


def attention_step(z: torch.Tensor, H: torch.Tensor, W_QK: torch.Tensor, W_V: torch.Tensor, T) -> torch.Tensor:
    """Atten(z) = z + Σ_i softmax_i(zᵀ W_QK h_i / T) W_V h_i (paper 000, eq. 1, with W_QK = W_QᵀW_K).

    z: (..., d), H: (N, d), W_QK, W_V: (d, d)  ->  (..., d).
    """
    check_query_tokens(z, H, W_QK)
    check_query_tokens(z, H, W_V)
    p = boltzmann_weights(dot_product_potentials(z, H, W_QK), T)  # softmax_i(zᵀW_QK h_i / T)
    return z + torch.einsum("...i,ia->...a", p, _mapped_tokens(H, W_V))


# ----------------------------------------------------------------------------- the sphere
def _check_on_sphere(x, v, v_name: str) -> None:
    check_tensor("x", x)
    if x.dim() < 1:
        raise ValueError(f"x must have at least 1 dim (..., d), got shape {tuple(x.shape)}")
    check_tensor(v_name, v)
    if x.shape != v.shape:
        raise ValueError(f"{v_name} must have the shape of x {tuple(x.shape)}, got {tuple(v.shape)}")


def _tangent_projection(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """:func:`tangent_projection` without the tensor checks (the zero-row check stays: it would give NaN)."""
    norm = x.norm(dim=-1, keepdim=True)
    check_nonzero_rows("x", x, norm, why="a zero vector has no direction, hence no tangent space on the sphere")
    x_hat = x / norm
    return v - (x_hat * v).sum(-1, keepdim=True) * x_hat


def tangent_projection(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """P_x v = v − ⟨x̂, v⟩ x̂ row-wise, x̂ = x/‖x‖: the part of v tangent to the sphere through x (Geshkovski et al.).

    x, v: (..., d) of the same shape  ->  (..., d). A zero row of x has no tangent space: ValueError naming x.
    """
    _check_on_sphere(x, v, "v")
    return _tangent_projection(x, v)


def sphere_step(x: torch.Tensor, update: torch.Tensor, eta: float) -> torch.Tensor:
    """Projected step on the sphere: x ← ‖x‖ · (x + η P_x u) / ‖x + η P_x u‖ (row-wise; keeps each ‖x_i‖).

    x, update: (..., d), x without zero rows (ValueError naming x); eta > 0.
    """
    _check_on_sphere(x, update, "update")
    eta = check_positive("eta", eta)
    y = x + eta * _tangent_projection(x, update)
    return y * (x.norm(dim=-1, keepdim=True) / y.norm(dim=-1, keepdim=True))


# ----------------------------------------------------------------------------- paper 000: more operators
def linear_attention_update(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """−∇_z F* = T Σ_i (zᵀ W h_i) W h_i for F* = −(T/2) Σ_i (zᵀW h_i)² (paper 000, Theorem 3).

    A step of rate η is linear attention (eq. 13) with W_QᵀW_K = W and W_V = ηT W, as the paper states
    (here the factor T is genuine: it multiplies the energy). z: (..., d)  ->  (..., d).
    """
    T = check_positive("T", T)
    scores = -dot_product_potentials(z, H, W)  # (..., N): zᵀ W h_i
    return T * torch.einsum("...i,ia->...a", scores, _mapped_tokens(H, W))


def _elastic_statistics(z, H, W, T):
    """p (..., N), W h_i (N, d), h̄ (..., d) and d_i = W h_i − h̄ (..., N, d) of paper 000, Lemma 2."""
    p = boltzmann_weights(elastic_potentials(z, H, W), T)
    WH = _mapped_tokens(H, W)
    h_bar = torch.einsum("...i,ia->...a", p, WH)
    return p, WH, h_bar, WH - h_bar.unsqueeze(-2)


def att2nd_update(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """Newton direction −[∇²F*]⁻¹ ∇F* = −[I − (1/T) Σ_i p_i d_i d_iᵀ]⁻¹ (z − h̄) (paper 000, eqs. 9-10, Att2nd).

    O(d³) per query (a d × d solve). z: (..., d)  ->  (..., d).
    """
    p, _, h_bar, d = _elastic_statistics(z, H, W, T)
    cov = torch.einsum("...i,...ia,...ib->...ab", p, d, d)  # Σ_i p_i d_i d_iᵀ
    hess = torch.eye(z.shape[-1], dtype=z.dtype, device=z.device) - cov / T
    return -torch.linalg.solve(hess, (z - h_bar).unsqueeze(-1)).squeeze(-1)


def att2nd1st_update(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """First Taylor term of Att2nd: −(z − h̄) − (1/T) Σ_i p_i d_i [d_iᵀ (z − h̄)] (paper 000, Att2nd1st).

    [I − C/T]⁻¹ ≈ I + C/T; the error is O(‖C/T‖²). d_iᵀ(z − h̄) first keeps it O(Nd). z: (..., d) -> (..., d).
    """
    p, _, h_bar, d = _elastic_statistics(z, H, W, T)
    g = z - h_bar
    proj = torch.einsum("...ia,...a->...i", d, g)  # d_iᵀ (z − h̄): (..., N)
    return -g - torch.einsum("...i,...ia->...a", p * proj, d) / T


def _heads_qk(z, H, W1, W2, T, potential: str):
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
    """−∇_z F* = −(1/H) Σ_h W_{1,h}ᵀ (q_h − k̄_h) for the average free energy (paper 000, Theorem 2).

    z: (..., d), H: (N, d), W1, W2: (heads, d_h, d)  ->  (..., d).
    """
    q, k, weights = _heads_qk(z, H, W1, W2, T, "elastic")
    g = (q - weights @ k).squeeze(-2)  # (..., heads, d_h): q_h − k̄_h
    return -torch.einsum("hca,...hc->...a", W1, g) / W1.shape[0]


def mha2nd_update(z, H, W1, W2, T) -> torch.Tensor:
    """Per-head Newton direction −Σ_h W_{1,h}ᵀ G_h⁻¹ C_h⁻¹ G_h (q_h − k̄_h), C_h = I − (1/T) Σ_i p_i d_i d_iᵀ.

    Paper 000, Sec. 4: Newton on each F_h* with the range-space inverse (WᵀCW)⁺ ≈ Wᵀ(WWᵀ)⁻¹C⁻¹W of its
    footnote 7, G_h = W_{1,h}W_{1,h}ᵀ (the paper's rate η/H is a step size, left out here). That inverse is
    exact only when G_h = I: if the rows of all W_{1,h} together form an orthogonal matrix, this direction is
    exactly −[∇²F*]⁻¹∇F* of the average free energy (the 1/H of F* cancels). z: (..., d)  ->  (..., d).
    """
    q, k, weights = _heads_qk(z, H, W1, W2, T, "elastic")
    k_bar = weights @ k
    d = k - k_bar.squeeze(-2).unsqueeze(-2)  # (..., heads, N, d_h)
    cov = torch.einsum("...hi,...hic,...hie->...hce", weights.squeeze(-2), d, d)
    C = torch.eye(d.shape[-1], dtype=z.dtype, device=z.device) - cov / T
    G = W1 @ W1.transpose(-1, -2)  # (heads, d_h, d_h)
    g = (q - k_bar).squeeze(-2)  # (..., heads, d_h)
    y = torch.linalg.solve(C, torch.einsum("hce,...he->...hc", G, g).unsqueeze(-1)).squeeze(-1)
    y = torch.linalg.solve(G, y.unsqueeze(-1)).squeeze(-1)
    return -torch.einsum("hca,...hc->...a", W1, y)


def mha2nd1st_update(z, H, W1, W2, T, T2=None, potential: str = "elastic", ridge: float = 0.0) -> torch.Tensor:
    """MHA2nd1st direction −Σ_h W_{1,h}ᵀ [(q_h − k̄_h) + b_h] (paper 000, Sec. 4 and App. A.8, first Taylor term).

    b_h = G_h⁻¹ (1/T') Σ_i p_{i,h} d_{i,h} d_{i,h}ᵀ G_h (q_h − k̄_h); T' defaults to T. ``potential="elastic"``
    uses p from ½‖q_h − k_{i,h}‖² (the derivation), ``"dot"`` from q_hᵀk_{i,h} (the layer, with learnable T_h);
    on a sphere the two agree. The layer replaces −W_{1,h}ᵀ (and the step η/H) by a learnable W_{O,h}.
    z: (..., d), H: (N, d), W1 (= W_Q), W2 (= W_K): (heads, d_h, d)  ->  (..., d).
    """
    q, k, weights = _heads_qk(z, H, W1, W2, T, potential)
    G = W1 @ W1.transpose(-1, -2)
    direction = newton_first_order_direction(q, k, weights, G, T if T2 is None else T2, ridge).squeeze(-2)
    return -torch.einsum("hca,...hc->...a", W1, direction)


# ----------------------------------------------------------------------------- Hopfield, EA, local energies
def hopfield_update(xi: torch.Tensor, X: torch.Tensor, beta) -> torch.Tensor:
    """−∇E(ξ) = X softmax(β Xᵀ ξ) − ξ, so ξ + update is the CCCP / retrieval step (Ramsauer et al. 2021).

    xi: (..., d), X: (N, d) patterns as rows  ->  (..., d).
    """
    check_tensor("xi", xi)
    check_tensor("X", X, ndim=2)
    check_count("X", X, 0, what="pattern", why="a softmax over zero keys is undefined")
    beta = check_positive("beta", beta)
    p = torch.softmax(beta * torch.einsum("...a,ia->...i", xi, X), dim=-1)
    return torch.einsum("...i,ia->...a", p, X) - xi


def expressive_free_energy_update(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """−∇_z F_EA = T Σ_i p_i · 2/(s_i(1+s_i²)) · W h_i, p = EA weights, s_i = zᵀW h_i (paper 001 weights).

    Written as T Σ_i 2 s_i / ((1+s_i²)² Σ_j w_j) W h_i, which is smooth at s_i = 0. This is *not* the EA layer
    Σ_i p_i W_V h_i: the Boltzmann weights are EA's exactly, the gradient carries the extra factor
    2/(s_i(1+s_i²)). z: (..., d)  ->  (..., d). A query whose scores are all 0 (z, H or W zero) has F_EA = +inf
    and no gradient: ValueError naming z.
    """
    T = check_positive("T", T)
    s = -dot_product_potentials(z, H, W)  # (..., N)
    s2 = _squared_scores(s)
    w_sum = (s2 / (1 + s2)).sum(-1, keepdim=True)
    if not _value_checks_off() and (w_sum == 0).any():
        raise ValueError("z: every score s_i = zᵀW h_i of a query is 0 (z, H or W is zero), where F_EA = +inf "
                         "and its gradient is undefined")
    coef = 2 * s / ((1 + s2).pow(2) * w_sum)
    return T * torch.einsum("...i,ia->...a", coef, _mapped_tokens(H, W))


def expressive_attention_step(z: torch.Tensor, H: torch.Tensor, W_QK: torch.Tensor, W_V: torch.Tensor) -> torch.Tensor:
    """EA(z) = z + Σ_i [s_i²/(1+s_i²) / Σ_j s_j²/(1+s_j²)] W_V h_i, s_i = zᵀ W_QK h_i (paper 001, with a residual).

    A query whose scores are all 0 gets zero weights (see :func:`expressive_weights`), so EA(z) = z there.
    """
    check_query_tokens(z, H, W_QK)
    check_query_tokens(z, H, W_V)
    p = expressive_weights(-dot_product_potentials(z, H, W_QK))
    return z + torch.einsum("...i,ia->...a", p, _mapped_tokens(H, W_V))


def local_attention_update(x: torch.Tensor, J: torch.Tensor, lam, context: torch.Tensor | None = None) -> torch.Tensor:
    """−∂e_i/∂x_i = Σ_{j≠i} α_ij J_ij c_j, α_ij = softmax_{j≠i}(λ x_iᵀ J_ij c_j) (D'Amico & Negri, eqs. 3-4).

    Each token descends its own local energy with the other tokens c_j held fixed; with the context c = x
    (the default) this is self-attention with value map J_ij. x, context: (..., N, d), J: (N, N, d, d).
    """
    context = x if context is None else context
    local_energies(x, context, J, lam)  # validates x (N ≥ 2), context, J, lam
    lam = check_positive("lam", lam)
    n = x.shape[-2]
    # (J_ij c_j)_a is shared by the logits and the output: form it once, (..., N, N, d). Two-operand einsums
    # also avoid the slow contraction order torch picks for the three-operand version (~10x here).
    Jc = torch.einsum("ijab,...jb->...ija", J, context)
    logits = lam * torch.einsum("...ia,...ija->...ij", x, Jc)
    off_diag = ~torch.eye(n, dtype=torch.bool, device=x.device)
    alpha = dot_product_weights(logits, off_diag)
    return torch.einsum("...ij,...ija->...ia", alpha, Jc)


def sphere_interaction_update(x: torch.Tensor, beta) -> torch.Tensor:
    """P_x ∇E_β = P_{x_i}((1/n²) Σ_j exp(β⟨x_i, x_j⟩) x_j): descent on −E_β (Geshkovski et al. 2023).

    The unnormalised dynamics USA is ẋ_i = n · update_i (a time rescaling); the normalised SA divides token i
    by Z_i/n instead, a positive per-token rescaling of the same tangent field. x: (..., n, d) -> (..., n, d).
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
    return _tangent_projection(x, y)


def symmetric_attention_update(x: torch.Tensor, A: torch.Tensor, beta) -> torch.Tensor:
    """−P_x ∇E = P_{x_i}(Σ_j exp(β x_iᵀA x_j) A x_j): unnormalised self-attention with W_V = A = Aᵀ.

    Tomihari & Karakida, Prop. 4.1 (symmetric case, continuous time, projected on the sphere). Softmax
    attention divides token i by Z_i > 0: a descent direction too, but not this gradient. x: (..., N, d), non-zero
    rows (ValueError naming x); where exp(β x_iᵀA x_j) overflows the dtype a ValueError names beta.
    """
    symmetric_attention_energy(x, A, beta)  # validates x, A (symmetric), beta, and the overflow of exp
    beta = check_positive("beta", beta)
    kernel = torch.exp(beta * torch.einsum("...ia,ab,...jb->...ij", x, A, x))
    y = kernel @ x @ A
    check_overflow("beta", beta, y, "exp(beta x_iᵀA x_j)")
    return _tangent_projection(x, y)
