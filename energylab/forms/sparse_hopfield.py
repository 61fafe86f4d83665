"""Hopfield–Fenchel–Young energies (Santos et al. 2024): sparse retrieval as descent; one family of the catalog.

A regulariser Ω, convex on the probability simplex Δ, defines the regularised argmax and its convex conjugate

    ŷ_Ω(θ) = argmax_{p ∈ Δ} ⟨p, θ⟩ − Ω(p),        Ω*(θ) = max_{p ∈ Δ} ⟨p, θ⟩ − Ω(p) = ⟨ŷ_Ω(θ), θ⟩ − Ω(ŷ_Ω(θ)),

and ∇Ω*(θ) = ŷ_Ω(θ) (Danskin's theorem; Blondel, Martins and Niculae 2020). The Hopfield–Fenchel–Young energy of a
state ξ (d) against patterns X (N, d) as rows is (Santos, Niculae, McNamee and Martins, ICML 2024; their energy is
written as a difference of Fenchel–Young losses and equals this one up to a constant)

    E(ξ) = −β⁻¹ Ω*(β X ξ) + ½ ξᵀξ,        −∇E(ξ) = Xᵀ ŷ_Ω(β X ξ) − ξ,

so the rate-one gradient step ξ ← Xᵀ ŷ_Ω(β X ξ) is the concave–convex (CCCP) step: E never rises along it (the
first term is concave, the second convex; chapter 3's proof word for word). The regularisers, each written so that
Ω(e_i) = 0 at every vertex (so Ω* = max θ where ŷ is one-hot), and their maps:

- Tsallis, α > 1:  Ω(p) = (Σ_j p_j^α − 1) / (α(α − 1));  ŷ_j = [(α − 1)θ_j − τ]_+^{1/(α−1)} with τ such that Σ ŷ = 1
  (α-entmax, Peters, Niculae and Martins 2019). α = 2: Ω = ½‖p‖² − ½ and ŷ = sparsemax(θ) = [θ − τ]_+, the
  Euclidean projection onto Δ (Martins and Astudillo 2016). α → 1: Shannon, Ω(p) = Σ p_j log p_j, ŷ = softmax,
  Ω* = logsumexp and E is chapter 3's modern Hopfield energy (Ramsauer et al. 2021).
- norm, α > 1:  Ω(p) = ‖p‖_α − 1;  ŷ_j = u_j / Σ_k u_k with u_j = [θ_j − τ]_+^{1/(α−1)} and τ such that
  Σ_j [θ_j − τ]_+^{α/(α−1)} = 1 (α-normmax; derived here from the KKT conditions, θ_j − (p_j/‖p‖_α)^{α−1} = τ on the
  support; the same map as ``normmax_bisect`` of the ``entmax`` package).

**Margins and exact retrieval.** ŷ_Ω(θ) = e_i exactly iff θ − ∇Ω(e_i) lies in the normal cone of Δ at e_i, i.e.
θ_i − θ_j ≥ ∂_iΩ(e_i) − ∂_jΩ(e_i) for every j ≠ i. This is the margin m of the Fenchel–Young loss: m = 1/(α − 1)
for Tsallis (1 for sparsemax, 2 for 1.5-entmax, ∞ for softmax, which is never one-hot) and m = 1 for every
α-normmax. With θ = βXξ the state after ONE step is exactly the pattern x_i iff

    β (x_iᵀξ − max_{j≠i} x_jᵀξ) ≥ m                       (the query's margin; :func:`query_margin`).

A sufficient condition on the patterns alone (the form Santos et al. state): if ξ = x_i + r u with ‖u‖ ≤ 1 and
M = max_j ‖x_j‖, then x_iᵀξ − x_jᵀξ ≥ Δ_i − r‖x_i − x_j‖ ≥ Δ_i − 2Mr with Δ_i = x_iᵀx_i − max_{j≠i} x_iᵀx_j, so
Δ_i ≥ m/β + 2Mr retrieves x_i exactly in one step from every query in the ball of radius r.

Maps: :func:`sparsemax` and :func:`entmax15` by sorting (exact thresholds), :func:`entmax_bisect` (any α > 1) and
:func:`normmax` by bisection on τ to the dtype's resolution with the implicit-function derivative of τ attached (so that
autograd differentiates the map correctly). For α > 2 both maps are intrinsically ill-conditioned near a threshold:
an entry with gap g = (α−1)θ_j − τ is g^{1/(α−1)}, so a change of θ at the rounding level moves it by about
(ε|θ|)^{1/(α−1)}, whatever the algorithm. Every map returns weights that sum to one and are exactly
one-hot when the margin condition holds (a one-hot output is e_i bit for bit, so Xᵀŷ is x_i bit for bit).
Shapes: θ (..., N) -> (..., N); a state ξ (..., d), patterns X (N, d) as rows.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch

from energylab._checks import check_count, check_positive, check_tensor
from energylab.catalog import AttentionForm, Equation, register
from energylab.forms._common import NO_KEYS, check_hopfield, randn

# the chapter that derives this family's forms
CHAPTER = "12_sparse_hopfield"
# the Atlas (chapter 11) groups this module's forms under this title
FAMILY = "Sparse Hopfield (Fenchel–Young) retrieval"

__all__ = ["sparsemax", "entmax15", "entmax_bisect", "normmax", "softmax", "tsallis_regulariser",
           "norm_regulariser", "Regulariser", "regulariser", "conjugate", "margin", "fy_hopfield_energy",
           "fy_hopfield_update", "query_margin", "pattern_separation"]


# ----------------------------------------------------------------------------- checks and small helpers
def _check_theta(theta):
    check_tensor("theta", theta)
    if theta.dim() < 1:
        raise ValueError(f"theta must have at least 1 dim (..., N), got shape {tuple(theta.shape)}")
    check_count("theta", theta, -1, what="score on its last dim", why=NO_KEYS)


def _check_alpha(alpha) -> float:
    alpha = check_positive("alpha", alpha, scalar=True)
    if not alpha > 1:
        raise ValueError(f"alpha must be > 1 (alpha -> 1 is softmax: use softmax), got {alpha}")
    return alpha


def _pos_pow(x: torch.Tensor, e: float) -> torch.Tensor:
    """[x]_+^e with a finite gradient everywhere (zero where x ≤ 0, even for e < 1)."""
    pos = x > 0
    return torch.where(pos, torch.where(pos, x, torch.ones_like(x)) ** e, torch.zeros_like(x))


def _bisect(f: Callable[[torch.Tensor], torch.Tensor], lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """The root of a decreasing f on [lo, hi] (f(lo) ≥ 0 ≥ f(hi)) to the dtype's resolution; no gradient."""
    with torch.no_grad():
        lo, hi = lo.clone(), hi.clone()
        for _ in range(round(-math.log2(torch.finfo(lo.dtype).eps)) + 3):  # width ≤ 1 halves below resolution
            mid = (lo + hi) / 2
            above = f(mid) >= 0
            lo = torch.where(above, mid, lo)
            hi = torch.where(above, hi, mid)
        return (lo + hi) / 2


def _implicit(tau0: torch.Tensor, f: torch.Tensor, slope_terms: torch.Tensor) -> torch.Tensor:
    """τ0 (the root of the decreasing f, found without gradient) carrying the implicit-function gradient
    dτ = (∂f/∂z · dz) / Σ slope_terms, where ``f`` is computed from z with gradient at τ0 and ``slope_terms`` are
    the entries of −∂f/∂τ at τ0. The value is τ0 exactly: a Newton step would not improve it (f is flat to
    rounding there) and near a threshold, where −∂f/∂τ is dominated by a vanishing gap, it could overshoot."""
    return tau0 + (f - f.detach()) / slope_terms.sum(-1, keepdim=True)


# ----------------------------------------------------------------------------- the maps ŷ_Ω
def softmax(theta: torch.Tensor) -> torch.Tensor:
    """ŷ for Ω(p) = Σ p log p (Shannon): softmax over the last dim (never exactly one-hot)."""
    _check_theta(theta)
    return torch.softmax(theta, dim=-1)


def sparsemax(theta: torch.Tensor) -> torch.Tensor:
    """ŷ for Ω(p) = ½‖p‖² − ½: the Euclidean projection of θ onto the simplex, [θ − τ]_+ (Martins and Astudillo 2016).

    Sorting θ_(1) ≥ θ_(2) ≥ ..., the support has k = max{k : 1 + kθ_(k) > Σ_{j≤k} θ_(j)} elements and
    τ = (Σ_{j≤k} θ_(j) − 1)/k. θ (..., N) -> (..., N).
    """
    _check_theta(theta)
    z = theta - theta.amax(-1, keepdim=True).detach()  # shift-invariant; the largest score is 0
    srt = z.sort(dim=-1, descending=True).values
    cum = srt.cumsum(-1)
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    with torch.no_grad():
        support = (1 + k * srt > cum).sum(-1, keepdim=True)  # ≥ 1 (the first element always qualifies)
    tau = (cum.gather(-1, support - 1) - 1) / support.to(z.dtype)
    p = torch.clamp(z - tau, min=0)
    return p / p.sum(-1, keepdim=True)


def entmax15(theta: torch.Tensor) -> torch.Tensor:
    """ŷ for the Tsallis regulariser at α = 1.5: [θ/2 − τ]_+², τ exact by sorting (Peters et al. 2019).

    With z = θ/2 sorted descending, the support of size k solves Σ_{j≤k}(z_(j) − τ)² = 1, a quadratic in τ:
    τ_k = mean_k − √((1 − S_k)/k), S_k = Σ_{j≤k} z_(j)² − k·mean_k²; k is the largest with τ_k ≤ z_(k).
    θ (..., N) -> (..., N).
    """
    _check_theta(theta)
    z = (theta - theta.amax(-1, keepdim=True).detach()) / 2
    srt = z.sort(dim=-1, descending=True).values
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    mean = srt.cumsum(-1) / k
    spread = srt.pow(2).cumsum(-1) - k * mean.pow(2)
    with torch.no_grad():
        tau_all = mean - torch.sqrt(torch.clamp((1 - spread) / k, min=0))
        support = (tau_all <= srt).sum(-1, keepdim=True)
    kk = support.to(z.dtype)
    delta = (1 - spread.gather(-1, support - 1)) / kk
    tau = mean.gather(-1, support - 1) - torch.sqrt(torch.clamp(delta, min=torch.finfo(z.dtype).tiny))
    p = torch.clamp(z - tau, min=0).pow(2)
    return p / p.sum(-1, keepdim=True)


def entmax_bisect(theta: torch.Tensor, alpha) -> torch.Tensor:
    """ŷ for the Tsallis regulariser at any α > 1: [(α − 1)θ − τ]_+^{1/(α−1)}, τ by bisection (implicit gradient).

    With z = (α − 1)(θ − max θ), the root τ of f(τ) = Σ_j [z_j − τ]_+^{1/(α−1)} − 1 lies in [−1, −N^{1−α}].
    θ (..., N) -> (..., N).
    """
    _check_theta(theta)
    alpha = _check_alpha(alpha)
    e = 1 / (alpha - 1)
    z = (alpha - 1) * (theta - theta.amax(-1, keepdim=True).detach())
    zd = z.detach()
    n = z.shape[-1]
    lo = torch.full_like(zd[..., :1], -1.0)
    hi = torch.full_like(zd[..., :1], -(1 / n) ** (alpha - 1))
    tau0 = _bisect(lambda t: _pos_pow(zd - t, e).sum(-1, keepdim=True) - 1, lo, hi)
    tau = _implicit(tau0, _pos_pow(z - tau0, e).sum(-1, keepdim=True), e * _pos_pow(zd - tau0, e - 1))
    p = _pos_pow(z - tau, e)
    return p / p.sum(-1, keepdim=True)


def normmax(theta: torch.Tensor, alpha) -> torch.Tensor:
    """ŷ for Ω(p) = ‖p‖_α − 1 (α-normmax): u/Σu with u_j = [θ_j − τ]_+^{1/(α−1)}, Σ_j [θ_j − τ]_+^{α/(α−1)} = 1.

    The root τ lies in [max θ − 1, max θ]; bisection, implicit gradient. θ (..., N) -> (..., N).
    """
    _check_theta(theta)
    alpha = _check_alpha(alpha)
    e = 1 / (alpha - 1)
    z = theta - theta.amax(-1, keepdim=True).detach()
    zd = z.detach()
    tau0 = _bisect(lambda t: _pos_pow(zd - t, alpha * e).sum(-1, keepdim=True) - 1,
                   torch.full_like(zd[..., :1], -1.0), torch.zeros_like(zd[..., :1]))
    tau = _implicit(tau0, _pos_pow(z - tau0, alpha * e).sum(-1, keepdim=True), alpha * e * _pos_pow(zd - tau0, e))
    u = _pos_pow(z - tau, e)
    return u / u.sum(-1, keepdim=True)


# ----------------------------------------------------------------------------- regularisers and conjugates
def tsallis_regulariser(p: torch.Tensor, alpha) -> torch.Tensor:
    """Ω(p) = (Σ_j p_j^α − 1)/(α(α − 1)) for α ≠ 1, Σ_j p_j log p_j at α = 1 (0 at every vertex). p (..., N) -> (...).
    """
    alpha = check_positive("alpha", alpha, scalar=True)
    if alpha == 1:
        return torch.special.xlogy(p, p).sum(-1)
    return (_pos_pow(p, alpha).sum(-1) - 1) / (alpha * (alpha - 1))


def norm_regulariser(p: torch.Tensor, alpha) -> torch.Tensor:
    """Ω(p) = ‖p‖_α − 1 on the simplex (0 at every vertex). p (..., N) -> (...)."""
    alpha = _check_alpha(alpha)
    return _pos_pow(p, alpha).sum(-1).pow(1 / alpha) - 1


class Regulariser(NamedTuple):
    """One regulariser Ω of the family: its map ŷ_Ω, its value Ω(p) and its margin (∞: never one-hot)."""

    name: str
    prediction: Callable[[torch.Tensor], torch.Tensor]  # θ (..., N) -> ŷ_Ω(θ) (..., N)
    omega: Callable[[torch.Tensor], torch.Tensor]  # p (..., N) -> Ω(p) (...)
    margin: float  # the smallest θ_i − max_{j≠i} θ_j with ŷ_Ω(θ) = e_i


def regulariser(kind: str, alpha=None) -> Regulariser:
    """``kind`` ∈ {"softmax", "sparsemax", "entmax15", "entmax", "normmax"}; ``alpha`` for "entmax" and "normmax"."""
    if kind == "softmax":
        return Regulariser("softmax", softmax, lambda p: tsallis_regulariser(p, 1), math.inf)
    if kind == "sparsemax":
        return Regulariser("sparsemax", sparsemax, lambda p: tsallis_regulariser(p, 2), 1.0)
    if kind == "entmax15":
        return Regulariser("1.5-entmax", entmax15, lambda p: tsallis_regulariser(p, 1.5), 2.0)
    if kind == "entmax":
        a = _check_alpha(alpha)
        return Regulariser(f"{a:g}-entmax", lambda t: entmax_bisect(t, a), lambda p: tsallis_regulariser(p, a),
                           1 / (a - 1))
    if kind == "normmax":
        a = _check_alpha(alpha)
        return Regulariser(f"{a:g}-normmax", lambda t: normmax(t, a), lambda p: norm_regulariser(p, a), 1.0)
    raise ValueError(f"kind must be one of 'softmax', 'sparsemax', 'entmax15', 'entmax', 'normmax', got {kind!r}")


def conjugate(theta: torch.Tensor, kind: str, alpha=None) -> torch.Tensor:
    """Ω*(θ) = ⟨ŷ_Ω(θ), θ⟩ − Ω(ŷ_Ω(θ)), in closed form from the map. θ (..., N) -> (...).

    Its autograd gradient is ŷ_Ω(θ) + Jᵀ(θ − ∇Ω(ŷ)), and the second term vanishes exactly when ŷ satisfies the
    optimality conditions on its support (θ − ∇Ω(ŷ) constant there, J's rows summing to zero): a check of the map.
    """
    reg = regulariser(kind, alpha)
    p = reg.prediction(theta)
    return (p * theta).sum(-1) - reg.omega(p)


def margin(kind: str, alpha=None) -> float:
    """The margin m of Ω: ŷ_Ω(θ) = e_i iff θ_i − θ_j ≥ m for all j ≠ i (1/(α − 1) for Tsallis, 1 for normmax)."""
    return regulariser(kind, alpha).margin


# ----------------------------------------------------------------------------- the energy and its operator
def fy_hopfield_energy(xi: torch.Tensor, X: torch.Tensor, beta, kind: str = "sparsemax", alpha=None) -> torch.Tensor:
    """E(ξ) = −β⁻¹ Ω*(β X ξ) + ½ ξᵀξ (Santos et al. 2024, without the constant). xi (..., d), X (N, d) -> (...)."""
    beta = check_hopfield(xi, X, beta)
    theta = beta * torch.einsum("...a,ia->...i", xi, X)
    return -conjugate(theta, kind, alpha) / beta + 0.5 * xi.pow(2).sum(-1)


def fy_hopfield_update(xi: torch.Tensor, X: torch.Tensor, beta, kind: str = "sparsemax", alpha=None) -> torch.Tensor:
    """−∇E(ξ) = Xᵀ ŷ_Ω(β X ξ) − ξ, so ξ + update is the CCCP / retrieval step. xi (..., d), X (N, d) -> (..., d)."""
    beta = check_hopfield(xi, X, beta)
    p = regulariser(kind, alpha).prediction(beta * torch.einsum("...a,ia->...i", xi, X))
    return torch.einsum("...i,ia->...a", p, X) - xi


def query_margin(xi: torch.Tensor, X: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """x_tᵀξ − max_{j≠t} x_jᵀξ for each state: xi (Q, d), X (N ≥ 2, d), target (Q,) indices -> (Q,)."""
    s = xi @ X.T
    own = s.gather(1, target[:, None]).squeeze(1)
    return own - s.scatter(1, target[:, None], -math.inf).amax(1)


def pattern_separation(X: torch.Tensor) -> torch.Tensor:
    """Δ_i = x_iᵀx_i − max_{j≠i} x_iᵀx_j for each pattern: X (N ≥ 2, d) -> (N,)."""
    return query_margin(X, X, torch.arange(X.shape[0]))


# ----------------------------------------------------------------------------- the catalog
def _sampler(kind: str, alpha_range=None):
    def sample(n_tokens, dim, generator=None, dtype=torch.float64):
        """ξ (3, d), {"X": (N, d) Gaussian patterns, "beta" in [0.1, 0.5) (supports of several patterns), alpha}."""
        X = randn(generator, dtype, n_tokens, dim)
        params = {"X": X, "beta": 0.1 + 0.4 * float(torch.rand((), generator=generator))}
        if alpha_range is not None:
            lo, hi = alpha_range
            params["alpha"] = lo + (hi - lo) * float(torch.rand((), generator=generator))
        return randn(generator, dtype, 3, dim), params
    return sample


_FORMS = {  # name: (kind, alpha range of the sampler, LaTeX of Ω, LaTeX of the map, note)
    "sparsemax_retrieval": ("sparsemax", None, r"\tfrac12\lVert p\rVert^2", r"\mathrm{sparsemax}",
                            "Exact gradient; Ω = ½‖p‖² (Tsallis α = 2), the map a projection onto the simplex by "
                            "sorting; one step returns the pattern exactly when β times the query's margin is ≥ 1."),
    "entmax15_retrieval": ("entmax15", None, r"\Omega^{\mathrm{T}}_{1.5}(p)", r"1.5\text{-}\mathrm{entmax}",
                           "Exact gradient; Tsallis α = 1.5, exact threshold by sorting; exact one-step retrieval "
                           "when β times the query's margin is ≥ 2."),
    "entmax_retrieval": ("entmax", (1.2, 3.0), r"\Omega^{\mathrm{T}}_{\alpha}(p)", r"\alpha\text{-}\mathrm{entmax}",
                         "Exact gradient; Tsallis α > 1, threshold by bisection; exact one-step "
                         "retrieval when β times the query's margin is ≥ 1/(α − 1)."),
    "normmax_retrieval": ("normmax", (1.5, 5.0), r"\lVert p\rVert_\alpha", r"\alpha\text{-}\mathrm{normmax}",
                          "Exact gradient; Ω = ‖p‖_α − 1, threshold by bisection; exact one-step "
                          "retrieval when β times the query's margin is ≥ 1, for every α."),
}


def _register(name, kind, alpha_range, omega_tex, map_tex, note):
    if alpha_range is None:
        energy = lambda xi, X, beta: fy_hopfield_energy(xi, X, beta, kind).sum()  # noqa: E731
        update = lambda xi, X, beta: fy_hopfield_update(xi, X, beta, kind)  # noqa: E731
    else:
        energy = lambda xi, X, beta, alpha: fy_hopfield_energy(xi, X, beta, kind, alpha).sum()  # noqa: E731
        update = lambda xi, X, beta, alpha: fy_hopfield_update(xi, X, beta, kind, alpha)  # noqa: E731
    register(AttentionForm(
        chapter=CHAPTER, name=name, paper="santos2024sparse", kind="gradient",
        equation=Equation(r"E(\xi) = -\beta^{-1}\Omega^*(\beta X^\top\xi) + \tfrac12\xi^\top\xi,\ \Omega(p) = "
                          + omega_tex,
                          r"-\nabla E = X\," + map_tex + r"(\beta X^\top\xi) - \xi"),
        energy=energy, update=update, sample=_sampler(kind, alpha_range), note=note,
    ))


for _name, _spec in _FORMS.items():
    _register(_name, *_spec)
