"""Newton forms of paper 000: attention as a second-order step on the free energy; one family of the catalog.

Paper 000 (*Transformers as intrinsic optimizers*), eqs. (9)-(10), Sec. 4 and App. A.8: the exact Newton
direction −[∇²F*]⁻¹∇F* of the elastic free energy (Att2nd), its first Taylor term (Att2nd1st), the exact
Newton step of the multi-head free energy for any invertible stacked W (MHA2nd), the paper's per-head step with
its range-space inverse, exact only for WWᵀ = I (MHA2nd-paper), its first-order version, the layer the paper
trained (MHA2nd1st), and the first-order version of the exact step (MHA2nd1st-corrected, ours), with the samplers
and ``register`` calls. The energies are those of :mod:`energylab.forms.free_energy`.

:func:`newton_first_order_direction` and :func:`ridge_inverse` are the per-head core of MHA2nd1st, shared by
:func:`mha2nd1st_update` and the layer :class:`energylab.layers.MHA2nd1st`. They are kernels by design and do
not validate: their inputs are projections that the caller made (the checked entry point is
:func:`mha2nd1st_update`).

Shapes (book/notation.md): z (..., d), tokens H (N, d), W (d, d), multi-head maps W1, W2 (heads, d_h, d),
d_h = d / heads (H is the token matrix, so a head count is written ``heads``).
"""
from __future__ import annotations

import math

import torch

from energylab.catalog import AttentionForm, Equation, register
from energylab.forms._common import mapped_tokens
from energylab.forms.free_energy import (
    boltzmann_weights,
    elastic_potentials,
    head_queries_keys,
    multihead_free_energy,
    sample_free_tokens,
    sample_heads,
    softmax_free_energy,
)

# the chapter that derives this family's forms (a form derived elsewhere names its own)
CHAPTER = "04_newton_attention"
# the Atlas (chapter 11) groups this module's forms under this title
FAMILY = "Free energies and Newton forms"

__all__ = ["att2nd_update", "att2nd1st_update", "mha2nd_update", "mha2nd_paper_update", "mha2nd1st_update",
           "mha2nd1st_corrected_update", "newton_first_order_direction", "ridge_inverse"]


# ----------------------------------------------------------------------------- one query, one head
def _solve(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """A⁻¹B, solved in float32 when A is a 16-bit float (torch has no half or bfloat16 LU), returned in B's dtype."""
    if A.dtype in (torch.float16, torch.bfloat16):
        return torch.linalg.solve(A.float(), B.float()).to(B.dtype)
    return torch.linalg.solve(A, B)


def _elastic_statistics(z, H, W, T):
    """p (..., N), W h_i (N, d), h̄ (..., d) and d_i = W h_i − h̄ (..., N, d) of paper 000, Lemma 2."""
    p = boltzmann_weights(elastic_potentials(z, H, W), T)
    WH = mapped_tokens(H, W)
    h_bar = torch.einsum("...i,ia->...a", p, WH)
    return p, WH, h_bar, WH - h_bar.unsqueeze(-2)


def att2nd_update(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """Newton direction −[∇²F*]⁻¹ ∇F* = −[I − (1/T) Σ_i p_i d_i d_iᵀ]⁻¹ (z − h̄) (paper 000, eqs. 9-10, Att2nd).

    O(d³) per query (a d × d solve). z: (..., d)  ->  (..., d).
    """
    p, _, h_bar, d = _elastic_statistics(z, H, W, T)
    cov = torch.einsum("...i,...ia,...ib->...ab", p, d, d)  # Σ_i p_i d_i d_iᵀ
    hess = torch.eye(z.shape[-1], dtype=z.dtype, device=z.device) - cov / T
    return -_solve(hess, (z - h_bar).unsqueeze(-1)).squeeze(-1)


def att2nd1st_update(z: torch.Tensor, H: torch.Tensor, W: torch.Tensor, T) -> torch.Tensor:
    """First Taylor term of Att2nd: −(z − h̄) − (1/T) Σ_i p_i d_i [d_iᵀ (z − h̄)] (paper 000, Att2nd1st).

    [I − C/T]⁻¹ ≈ I + C/T; the error is O(‖C/T‖²). d_iᵀ(z − h̄) first keeps it O(Nd). z: (..., d) -> (..., d).
    """
    p, _, h_bar, d = _elastic_statistics(z, H, W, T)
    g = z - h_bar
    proj = torch.einsum("...ia,...a->...i", d, g)  # d_iᵀ (z − h̄): (..., N)
    return -g - torch.einsum("...i,...ia->...a", p * proj, d) / T


# ----------------------------------------------------------------------------- per head
def _stacked(W1: torch.Tensor) -> torch.Tensor:
    """The rows of all W_{1,h} stacked: W (H·d_h, d) = (d, d), invertible for a valid instance."""
    return W1.reshape(-1, W1.shape[-1])


def _head_gradients(z, H, W1, W2, T):
    """g_h = q_h − k̄_h (..., heads, d_h) and C_h = I − (1/T) Σ_i p_{i,h} d_{i,h} d_{i,h}ᵀ (..., heads, d_h, d_h)."""
    q, k, weights = head_queries_keys(z, H, W1, W2, T, "elastic")
    k_bar = weights @ k
    d = k - k_bar.squeeze(-2).unsqueeze(-2)  # (..., heads, N, d_h)
    cov = torch.einsum("...hi,...hic,...hie->...hce", weights.squeeze(-2), d, d)
    C = torch.eye(d.shape[-1], dtype=z.dtype, device=z.device) - cov / T
    return (q - k_bar).squeeze(-2), C


def _unstack(W1, y):
    """−W⁻¹ y = −Wᵀ G⁻¹ y for y (..., heads, d_h), with W the stacked W_{1,h} and G = WWᵀ (one d × d solve)."""
    W = _stacked(W1)
    return -_solve(W, y.flatten(-2).unsqueeze(-1)).squeeze(-1)


def mha2nd_update(z, H, W1, W2, T) -> torch.Tensor:
    """Exact Newton direction −[∇²F*]⁻¹∇F* = −Wᵀ G⁻¹ C⁻¹ (q − k̄) of the multi-head free energy, any invertible W.

    ∇F* = (1/heads) Wᵀ g and ∇²F* = (1/heads) Wᵀ C W with W (d, d) the stacked W_{1,h}, g the stacked q_h − k̄_h and
    C = blockdiag(C_h), C_h = I − (1/T) Σ_i p_{i,h} d_{i,h} d_{i,h}ᵀ; so −[∇²F*]⁻¹∇F* = −W⁻¹ C⁻¹ g, and
    W⁻¹ = Wᵀ G⁻¹ with G = WWᵀ (all heads together: its off-diagonal blocks W_{1,h}W_{1,h'}ᵀ couple the heads).
    The 1/heads cancels. Per head this is −C_h⁻¹ g_h, then one d × d solve. z: (..., d)  ->  (..., d).
    """
    g, C = _head_gradients(z, H, W1, W2, T)
    return _unstack(W1, _solve(C, g.unsqueeze(-1)).squeeze(-1))


def mha2nd_paper_update(z, H, W1, W2, T) -> torch.Tensor:
    """Paper 000's per-head step −Σ_h W_{1,h}ᵀ G_h⁻¹ C_h⁻¹ G_h (q_h − k̄_h), G_h = W_{1,h}W_{1,h}ᵀ (Sec. 4).

    It uses the range-space inverse (WᵀCW)⁺ ≈ Wᵀ(WWᵀ)⁻¹C⁻¹W of the paper's footnote 7 per head (the paper's rate
    η/heads is a step size, left out here). That inverse is exact only when G = WWᵀ = I: then G_h = I and this is
    :func:`mha2nd_update`. For general W it is not the Newton direction (32-71% away from it for the catalog's
    well-conditioned samples); its error is first order in W's distance from an orthogonal matrix.
    z: (..., d)  ->  (..., d).
    """
    g, C = _head_gradients(z, H, W1, W2, T)
    G = W1 @ W1.transpose(-1, -2)  # (heads, d_h, d_h)
    y = _solve(C, torch.einsum("hce,...he->...hc", G, g).unsqueeze(-1)).squeeze(-1)
    y = _solve(G, y.unsqueeze(-1)).squeeze(-1)
    return -torch.einsum("hca,...hc->...a", W1, y)


def mha2nd1st_update(z, H, W1, W2, T, T2=None, potential: str = "elastic", ridge: float = 0.0) -> torch.Tensor:
    """MHA2nd1st direction −Σ_h W_{1,h}ᵀ [(q_h − k̄_h) + b_h] (paper 000, Sec. 4 and App. A.8, first Taylor term).

    b_h = G_h⁻¹ (1/T') Σ_i p_{i,h} d_{i,h} d_{i,h}ᵀ G_h (q_h − k̄_h); T' defaults to T. ``potential="elastic"``
    uses p from ½‖q_h − k_{i,h}‖² (the derivation), ``"dot"`` from q_hᵀk_{i,h} (the layer, with learnable T_h);
    on a sphere the two agree. The layer replaces −W_{1,h}ᵀ (and the step η/heads) by a learnable W_{O,h}.
    This is the first Taylor term of :func:`mha2nd_paper_update` (the paper's layer, what they trained), not of
    the exact Newton step unless WWᵀ = I; see :func:`mha2nd1st_corrected_update`.
    z: (..., d), H: (N, d), W1 (= W_Q), W2 (= W_K): (heads, d_h, d)  ->  (..., d).
    """
    q, k, weights = head_queries_keys(z, H, W1, W2, T, potential)
    G = W1 @ W1.transpose(-1, -2)
    direction = newton_first_order_direction(q, k, weights, G, T if T2 is None else T2, ridge).squeeze(-2)
    return -torch.einsum("hca,...hc->...a", W1, direction)


def mha2nd1st_corrected_update(z, H, W1, W2, T, T2=None, potential: str = "elastic") -> torch.Tensor:
    """First Taylor term of the exact per-head Newton step: −Wᵀ G⁻¹ [(q − k̄) + b], b_h = (1/T') C_h (q_h − k̄_h).

    C⁻¹ ≈ I + cov/T in :func:`mha2nd_update`, with cov_h = Σ_i p_{i,h} d_{i,h} d_{i,h}ᵀ: no G_h inside b_h, no
    per-head solve, no ridge. W (d, d) is the stacked W_{1,h} and G = WWᵀ; the layer absorbs −WᵀG⁻¹ (one d × d
    map) into its learnable W_O. Error O(‖cov/T‖²) against the exact Newton step for ANY invertible W.
    z: (..., d), H: (N, d), W1, W2: (heads, d_h, d)  ->  (..., d).
    """
    q, k, weights = head_queries_keys(z, H, W1, W2, T, potential)
    direction = newton_first_order_direction(q, k, weights, None, T if T2 is None else T2).squeeze(-2)
    return _unstack(W1, direction)


def newton_first_order_direction(q, k, weights, G=None, T2=1.0, ridge: float = 0.0, G_inv=None) -> torch.Tensor:
    """(q − k̄) + b with b = G⁻¹ (1/T') [Σ_j p_j k_j (k_jᵀ u) − k̄ (k̄ᵀ u)], u = G (q − k̄) (paper 000, eqs. 29-31).

    The per-head core of MHA2nd1st, shared by the catalog operator and :class:`energylab.layers.MHA2nd1st`.
    q: (..., M, d_h) queries, k: (..., N, d_h) keys, weights: (..., M, N) rows on the simplex, G: (..., d_h, d_h)
    symmetric positive definite (None = I), T2 > 0 broadcastable to (..., M, 1). The solve uses G + ridge·I;
    the paper does not say whether G is stabilised, a small ridge is our choice (0 gives the exact formula).
    ``G_inv`` may pass a precomputed (G + ridge·I)⁻¹ (see :func:`ridge_inverse`). Returns (..., M, d_h).
    """
    k_bar = weights @ k  # k̄ = Σ_j p_j k_j: (..., M, d_h)
    g = q - k_bar
    u = g if G is None else g @ G  # G symmetric: u_m = G g_m
    c = u @ k.transpose(-1, -2)  # (..., M, N): k_jᵀ u_m
    s = (weights * c) @ k - k_bar * (k_bar * u).sum(-1, keepdim=True)  # Σ_j p_j d_j d_jᵀ u (covariance form)
    s = s / T2
    if G is not None and G_inv is None:
        G_inv = ridge_inverse(G, ridge)
    if G_inv is not None:
        s = s @ G_inv.to(s.dtype)  # G⁻¹ symmetric: b_m = G⁻¹ s_m
    return g + s


def ridge_inverse(G: torch.Tensor, ridge: float = 0.0) -> torch.Tensor:
    """(G + ridge·I)⁻¹ of small (..., d_h, d_h) matrices, inverted in float32 or better (bf16 has no inverse)."""
    eye = torch.eye(G.shape[-1], dtype=G.dtype, device=G.device)
    work = G + ridge * eye
    return torch.linalg.inv(work if work.dtype in (torch.float32, torch.float64) else work.float()).to(G.dtype)


# ----------------------------------------------------------------------------- samplers
def _sample_newton(n_tokens, dim, generator=None, dtype=torch.float64):
    """Tokens spread little relative to T, so that I − C/T is safely invertible."""
    return sample_free_tokens(n_tokens, dim, generator, dtype, token_scale=0.4)


def _scale_tokens(params: dict, s: float) -> dict:
    """The tokens scaled by √s: the covariance Σ p_i d_i d_iᵀ (the Taylor correction) scales by s."""
    return {**params, "H": math.sqrt(s) * params["H"]}


def _toward_orthogonal(params: dict, s: float) -> dict:
    """W_{1,h} moved to distance s from its orthogonal polar factor U: W = U(I + s(P − I)), where the stacked
    W = UP (U orthogonal, P symmetric positive definite). At s = 0 the paper's per-head step is exact."""
    W1 = params["W1"]
    U, S, Vh = torch.linalg.svd(_stacked(W1))
    P = Vh.transpose(-1, -2) @ torch.diag(S) @ Vh
    eye = torch.eye(P.shape[-1], dtype=P.dtype)
    return {**params, "W1": ((U @ Vh) @ (eye + s * (P - eye))).reshape(W1.shape)}


# ----------------------------------------------------------------------------- the catalog
register(AttentionForm(
    chapter=CHAPTER,
    name="att2nd", paper="energyprinciple2025", kind="newton",
    equation=Equation(r"F^* = -T\log\sum_i e^{-\|z - W h_i\|^2/2T}",
                      r"-\big[I - \tfrac1T\sum_i p_i d_i d_i^\top\big]^{-1}(z - \bar h)"),
    energy=lambda z, H, W, T: softmax_free_energy(z, H, W, T).sum(),
    update=att2nd_update, sample=_sample_newton,
    note="Exact Newton direction (eqs. 9-10); needs I − C/T invertible.",
))
register(AttentionForm(
    chapter=CHAPTER,
    name="att2nd1st", paper="energyprinciple2025", kind="approx", reference="att2nd", order=2, shrink=_scale_tokens,
    equation=Equation(r"F^* = -T\log\sum_i e^{-\|z - W h_i\|^2/2T}",
                      r"-(z - \bar h) - \tfrac1T\sum_i p_i d_i\, d_i^\top(z - \bar h)"),
    energy=lambda z, H, W, T: softmax_free_energy(z, H, W, T).sum(),
    update=att2nd1st_update, sample=_sample_newton,
    note="First Taylor term of the inverse Hessian: error O(‖C/T‖²) against Att2nd.",
))
register(AttentionForm(
    chapter=CHAPTER,
    name="mha2nd", multi_head=True, paper="energyprinciple2025", kind="newton",
    equation=Equation(r"F^* = -\tfrac1H\sum_h T\log\sum_i e^{-\|W_{1,h}z - W_{2,h}h_i\|^2/2T}",
                      r"-W^\top G^{-1} C^{-1}(q - \bar k),\quad G = WW^\top"),
    energy=lambda z, H, W1, W2, T: multihead_free_energy(z, H, W1, W2, T).sum(),
    update=mha2nd_update, sample=sample_heads,
    note="Exact Newton on F* for any invertible stacked W = [W_{1,1}; ...; W_{1,H}] (sampled non-orthogonal): "
    "C = blockdiag(C_h) and G = WWᵀ with its cross-head blocks. Ours: the paper's per-head step is mha2nd-paper.",
))
register(AttentionForm(
    chapter=CHAPTER,
    name="mha2nd-paper", multi_head=True, paper="energyprinciple2025", kind="approx", reference="mha2nd", order=1,
    shrink=_toward_orthogonal,
    equation=Equation(r"F^* = -\tfrac1H\sum_h T\log\sum_i e^{-\|W_{1,h}z - W_{2,h}h_i\|^2/2T}",
                      r"-\sum_h W_{1,h}^\top G_h^{-1} C_h^{-1} G_h (q_h - \bar k_h)"),
    energy=lambda z, H, W1, W2, T: multihead_free_energy(z, H, W1, W2, T).sum(),
    update=mha2nd_paper_update, sample=sample_heads,
    note="The paper's per-head step (footnote 7's range-space inverse): exact only when WWᵀ = I; its error is "
    "first order in W's distance from its orthogonal polar factor (32-71% for the sampled W).",
))
register(AttentionForm(
    chapter=CHAPTER,
    name="mha2nd1st", multi_head=True, paper="energyprinciple2025", kind="approx", reference="mha2nd-paper", order=2,
    shrink=_scale_tokens,
    equation=Equation(r"F^* = -\tfrac1H\sum_h T\log\sum_i e^{-\|W_{1,h}z - W_{2,h}h_i\|^2/2T}",
                      r"-\sum_h W_{1,h}^\top\big[(q_h - \bar k_h) + b_h\big]"),
    energy=lambda z, H, W1, W2, T: multihead_free_energy(z, H, W1, W2, T).sum(),
    update=mha2nd1st_update, sample=sample_heads,
    note="App. A.8, the layer the paper trained: first Taylor term of C_h⁻¹ in the paper's per-head step "
    "(mha2nd-paper), b_h = G_h⁻¹(1/T')cov_h G_h(q_h − k̄_h); the layer learns W_O in place of −W_{1,h}ᵀ and uses "
    "dot-product scores with learnable T_h, T'_h.",
))
register(AttentionForm(
    chapter=CHAPTER,
    name="mha2nd1st-corrected", multi_head=True, paper="energyprinciple2025", kind="approx", reference="mha2nd",
    order=2, shrink=_scale_tokens,
    equation=Equation(r"F^* = -\tfrac1H\sum_h T\log\sum_i e^{-\|W_{1,h}z - W_{2,h}h_i\|^2/2T}",
                      r"-W^\top G^{-1}\big[(q - \bar k) + b\big],\ b_h = \tfrac1{T'}\mathrm{cov}_h(q_h - \bar k_h)"),
    energy=lambda z, H, W1, W2, T: multihead_free_energy(z, H, W1, W2, T).sum(),
    update=mha2nd1st_corrected_update, sample=sample_heads,
    note="Ours: first Taylor term of the exact Newton step (mha2nd) for any invertible W; no G_h, no solve, no "
    "ridge in b_h; the layer absorbs −WᵀG⁻¹ into its learned W_O.",
))
