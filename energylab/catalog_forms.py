"""The registered forms of :mod:`energylab.catalog`: each energy, its operator and a sampler of valid instances.

Samplers take ``(n_tokens, dim, generator=None, dtype=torch.float64)`` and return ``(x, params)``; ``x`` is
a batch of three queries (3, d) for query/token forms and the token matrix (N, d) for self-interaction forms.
Multi-head samplers use the smallest prime factor of ``dim`` as the number of heads (1 when dim is prime).
"""
from __future__ import annotations

import math

import torch

from energylab import energies as en
from energylab import hyperspherical as hs
from energylab import operators as op
from energylab._checks import check_int
from energylab.catalog import AttentionForm, Equation, register

__all__ = ["sample_sphere_tokens", "heads_for"]


# ----------------------------------------------------------------------------- sampling helpers
def _randn(generator, dtype, *shape) -> torch.Tensor:
    return torch.randn(*shape, generator=generator, dtype=dtype)


def _unit_rows(generator, dtype, *shape) -> torch.Tensor:
    x = _randn(generator, dtype, *shape)
    return x / x.norm(dim=-1, keepdim=True)


def _well_conditioned(generator, dtype, rows: int, cols: int | None = None, spread: float = 0.3):
    """I + spread·G/√cols (rows, cols): invertible with high probability when square, condition ~ 2."""
    cols = rows if cols is None else cols
    return torch.eye(rows, cols, dtype=dtype) + spread * _randn(generator, dtype, rows, cols) / math.sqrt(cols)


def _temperature(generator, dtype) -> float:
    return float(0.5 + torch.rand((), generator=generator, dtype=dtype))  # T in [0.5, 1.5)


def heads_for(dim: int) -> int:
    """The smallest prime factor of dim below dim (so d_h = dim/heads > 1), or 1 when dim is prime."""
    dim = check_int("dim", dim, minimum=1)
    return next((q for q in range(2, dim) if dim % q == 0), 1)


def sample_sphere_tokens(n_tokens: int, dim: int, generator=None, dtype=torch.float64, rho: float = 1.5):
    """z and tokens with ‖z‖ = ‖W h_i‖ = ρ for all i (the hypothesis of paper 000, Theorem 1).

    Returns (z (3, d), {"H": (N, d), "W": (d, d), "T": float}).
    """
    n_tokens, dim = check_int("n_tokens", n_tokens, minimum=1), check_int("dim", dim, minimum=1)
    W = _well_conditioned(generator, dtype, dim)
    targets = rho * _unit_rows(generator, dtype, n_tokens, dim)  # the W h_i, on the sphere
    H = torch.linalg.solve(W, targets.T).T  # h_i = W⁻¹ (ρ u_i)
    z = rho * _unit_rows(generator, dtype, 3, dim)
    return z, {"H": H, "W": W, "T": _temperature(generator, dtype)}


def _sample_free(n_tokens, dim, generator=None, dtype=torch.float64, token_scale: float = 1.0):
    """Unconstrained z (3, d), H (N, d), W (d, d), T."""
    W = _well_conditioned(generator, dtype, dim)
    H = token_scale * _randn(generator, dtype, n_tokens, dim)
    z = _randn(generator, dtype, 3, dim)
    return z, {"H": H, "W": W, "T": _temperature(generator, dtype)}


def _sample_newton(n_tokens, dim, generator=None, dtype=torch.float64):
    """Tokens spread little relative to T, so that I − C/T is safely invertible."""
    return _sample_free(n_tokens, dim, generator, dtype, token_scale=0.4)


def _sample_heads(n_tokens, dim, generator=None, dtype=torch.float64, orthogonal: bool = False):
    """z (3, d), H (N, d), W1, W2 (heads, d_h, d), T; orthogonal: the rows of all W_{1,h} form a rotation."""
    heads = heads_for(dim)
    if orthogonal:
        W1 = torch.linalg.qr(_randn(generator, dtype, dim, dim))[0]
    else:
        W1 = _well_conditioned(generator, dtype, dim)
    W1 = W1.reshape(heads, dim // heads, dim)  # (heads, d_h, d)
    W2 = _well_conditioned(generator, dtype, dim).reshape(heads, dim // heads, dim)
    H = 0.4 * _randn(generator, dtype, n_tokens, dim)
    z = _randn(generator, dtype, 3, dim)
    return z, {"H": H, "W1": W1, "W2": W2, "T": _temperature(generator, dtype)}


def _scale_tokens(params: dict, s: float) -> dict:
    """The tokens scaled by √s: the covariance Σ p_i d_i d_iᵀ (the Taylor correction) scales by s."""
    return {**params, "H": math.sqrt(s) * params["H"]}


def _sample_tokens_on_sphere(n_tokens, dim, generator=None, dtype=torch.float64):
    return _unit_rows(generator, dtype, n_tokens, dim), {"beta": 0.5 + float(torch.rand((), generator=generator))}


def _sample_symmetric(n_tokens, dim, generator=None, dtype=torch.float64):
    x, params = _sample_tokens_on_sphere(n_tokens, dim, generator, dtype)
    B = _randn(generator, dtype, dim, dim) / math.sqrt(dim)
    return x, {**params, "A": (B + B.T) / 2}


def _sample_hopfield(n_tokens, dim, generator=None, dtype=torch.float64):
    X = _randn(generator, dtype, n_tokens, dim)
    return _randn(generator, dtype, 3, dim), {"X": X, "beta": 0.5 + float(torch.rand((), generator=generator))}


def _sample_local(n_tokens, dim, generator=None, dtype=torch.float64):
    x = _unit_rows(generator, dtype, n_tokens, dim)
    J = _randn(generator, dtype, n_tokens, n_tokens, dim, dim) / dim
    return x, {"J": J, "lam": 2.0, "context": x.clone()}


def _sample_hyperset(n_tokens, dim, generator=None, dtype=torch.float64):
    heads = heads_for(dim)
    W = _randn(generator, dtype, dim, dim) / math.sqrt(dim)
    X = _randn(generator, dtype, n_tokens, dim)
    return X, {"W": W, "heads": heads, "beta": 1 / math.sqrt(dim // heads)}


def _sample_ff(n_tokens, dim, generator=None, dtype=torch.float64):
    D = _randn(generator, dtype, dim, 2 * dim + 1) / math.sqrt(dim)
    return _randn(generator, dtype, n_tokens, dim), {"D": D}


# ----------------------------------------------------------------------------- paper 000
register(AttentionForm(
    name="softmax_free_energy", paper="energyprinciple2025", kind="gradient",
    equation=Equation(r"F^* = -T\log\sum_i e^{-\|z - W h_i\|^2/2T}",
                      r"-\nabla_z F^* = \bar h - z,\quad \bar h = \sum_i p_i W h_i"),
    energy=lambda z, H, W, T: en.softmax_free_energy(z, H, W, T).sum(),
    update=op.softmax_free_energy_update, sample=sample_sphere_tokens,
    note="Exact gradient. On the sphere ‖z‖ = ‖W h_i‖ = ρ, F* = F̃* + ρ², so one step is softmax attention "
    "(Theorem 1, with W_V = ηW; the paper's ηT comes from a dropped 1/T).",
))
register(AttentionForm(
    name="dot_product_free_energy", paper="energyprinciple2025", kind="gradient",
    equation=Equation(r"\tilde F^* = -T\log\sum_i e^{z^\top W h_i/T}",
                      r"-\nabla_z \tilde F^* = \sum_i \mathrm{softmax}_i(z^\top W h_i/T)\, W h_i"),
    energy=lambda z, H, W, T: en.dot_product_free_energy(z, H, W, T).sum(),
    update=op.dot_product_free_energy_update, sample=_sample_free,
    note="Exact gradient for any z; attention (eq. 1) is z + η·update with W_QᵀW_K = W, W_V = ηW.",
))
register(AttentionForm(
    name="linear_attention", paper="energyprinciple2025", kind="gradient",
    equation=Equation(r"F^* = -\tfrac{T}{2}\sum_i (z^\top W h_i)^2",
                      r"-\nabla_z F^* = T\sum_i (z^\top W h_i)\, W h_i"),
    energy=lambda z, H, W, T: en.linear_attention_energy(z, H, W, T).sum(),
    update=op.linear_attention_update, sample=_sample_free,
    note="Exact gradient (Theorem 3): linear attention with W_V = ηT W.",
))
register(AttentionForm(
    name="multihead_free_energy", paper="energyprinciple2025", kind="gradient",
    equation=Equation(r"F^* = -\tfrac1H\sum_h T\log\sum_i e^{-\|W_{1,h}z - W_{2,h}h_i\|^2/2T}",
                      r"-\nabla_z F^* = -\tfrac1H\sum_h W_{1,h}^\top(q_h - \bar k_h)"),
    energy=lambda z, H, W1, W2, T: en.multihead_free_energy(z, H, W1, W2, T).sum(),
    update=op.multihead_free_energy_update, sample=_sample_heads,
    note="Exact gradient (Theorem 2); on the spheres ‖q_h‖ = ‖k_{i,h}‖ = ρ a step is multi-head attention.",
))
register(AttentionForm(
    name="att2nd", paper="energyprinciple2025", kind="newton",
    equation=Equation(r"F^* = -T\log\sum_i e^{-\|z - W h_i\|^2/2T}",
                      r"-\big[I - \tfrac1T\sum_i p_i d_i d_i^\top\big]^{-1}(z - \bar h)"),
    energy=lambda z, H, W, T: en.softmax_free_energy(z, H, W, T).sum(),
    update=op.att2nd_update, sample=_sample_newton,
    note="Exact Newton direction (eqs. 9-10); needs I − C/T invertible.",
))
register(AttentionForm(
    name="att2nd1st", paper="energyprinciple2025", kind="approx", reference="att2nd", order=2, shrink=_scale_tokens,
    equation=Equation(r"F^* = -T\log\sum_i e^{-\|z - W h_i\|^2/2T}",
                      r"-(z - \bar h) - \tfrac1T\sum_i p_i d_i\, d_i^\top(z - \bar h)"),
    energy=lambda z, H, W, T: en.softmax_free_energy(z, H, W, T).sum(),
    update=op.att2nd1st_update, sample=_sample_newton,
    note="First Taylor term of the inverse Hessian: error O(‖C/T‖²) against Att2nd.",
))
register(AttentionForm(
    name="mha2nd", paper="energyprinciple2025", kind="newton",
    equation=Equation(r"F^* = -\tfrac1H\sum_h T\log\sum_i e^{-\|W_{1,h}z - W_{2,h}h_i\|^2/2T}",
                      r"-\sum_h W_{1,h}^\top G_h^{-1} C_h^{-1} G_h (q_h - \bar k_h)"),
    energy=lambda z, H, W1, W2, T: en.multihead_free_energy(z, H, W1, W2, T).sum(),
    update=op.mha2nd_update, sample=lambda *a, **k: _sample_heads(*a, **k, orthogonal=True),
    note="Per-head Newton with the paper's range-space inverse; exact Newton on F* when the stacked W_{1,h} "
    "are orthogonal (sampled so here), otherwise the paper's approximation of it.",
))
register(AttentionForm(
    name="mha2nd1st", paper="energyprinciple2025", kind="approx", reference="mha2nd", order=2, shrink=_scale_tokens,
    equation=Equation(r"F^* = -\tfrac1H\sum_h T\log\sum_i e^{-\|W_{1,h}z - W_{2,h}h_i\|^2/2T}",
                      r"-\sum_h W_{1,h}^\top\big[(q_h - \bar k_h) + b_h\big]"),
    energy=lambda z, H, W1, W2, T: en.multihead_free_energy(z, H, W1, W2, T).sum(),
    update=op.mha2nd1st_update, sample=_sample_heads,
    note="App. A.8: first Taylor term of C_h⁻¹ in the per-head Newton step; the layer learns W_O in place "
    "of −W_{1,h}ᵀ and uses dot-product scores with learnable T_h, T'_h.",
))

# ----------------------------------------------------------------------------- Hopfield, EA, local energies
register(AttentionForm(
    name="hopfield_retrieval", paper="ramsauer2021", kind="gradient",
    equation=Equation(r"E(\xi) = -\beta^{-1}\log\sum_i e^{\beta x_i^\top\xi} + \tfrac12\xi^\top\xi",
                      r"-\nabla E = X\,\mathrm{softmax}(\beta X^\top\xi) - \xi"),
    energy=lambda xi, X, beta: en.hopfield_energy(xi, X, beta).sum(),
    update=op.hopfield_update, sample=_sample_hopfield,
    note="Exact gradient; ξ + update is the CCCP step, i.e. cross-attention with the patterns as keys and values.",
))
register(AttentionForm(
    name="expressive_attention", paper="gros2024expressive", kind="gradient",
    equation=Equation(r"F_{EA} = -T\log\sum_i \frac{s_i^2}{1+s_i^2},\ s_i = z^\top W h_i",
                      r"-\nabla_z F_{EA} = T\sum_i p_i\,\frac{2}{s_i(1+s_i^2)}\,W h_i"),
    energy=lambda z, H, W, T: en.expressive_free_energy(z, H, W, T).sum(),
    update=op.expressive_free_energy_update, sample=_sample_free,
    note="Exact: EA's weights p_i are the Boltzmann weights of E_i = −T log(s_i²/(1+s_i²)) (Lemma 1 holds). "
    "Not exact: the EA layer Σ_i p_i W_V h_i is not −∇F_EA (the gradient carries 2/(s_i(1+s_i²))).",
))
register(AttentionForm(
    name="local_self_attention", paper="damico2024attractor", kind="gradient",
    equation=Equation(r"\sum_i e_i,\ e_i = -\lambda^{-1}\log\sum_{j\ne i} e^{\lambda x_i^\top J_{ij} c_j}",
                      r"-\partial e_i/\partial x_i = \sum_{j\ne i}\alpha_{ij} J_{ij} c_j"),
    energy=lambda x, J, lam, context: en.local_energies(x, context, J, lam).sum(),
    update=op.local_attention_update, sample=_sample_local, min_tokens=2,
    note="Exact gradient of each local energy in its own token, the others (context c) held fixed; at c = x "
    "it is self-attention with value map J_ij. Σ_i e_i with c = x moving too is not what it descends.",
))
register(AttentionForm(
    name="sphere_interaction", paper="geshkovski2023", kind="gradient", on_sphere=True,
    equation=Equation(r"-E_\beta = -\frac{1}{2\beta n^2}\sum_{ij} e^{\beta\langle x_i, x_j\rangle}",
                      r"P_{x_i}\Big(\tfrac{1}{n^2}\sum_j e^{\beta\langle x_i,x_j\rangle}x_j\Big)"),
    energy=lambda x, beta: -en.sphere_interaction_energy(x, beta),
    update=op.sphere_interaction_update, sample=_sample_tokens_on_sphere,
    note="Exact tangent gradient of −E_β; USA is n × this field, SA rescales each token by n/Z_i > 0.",
))
register(AttentionForm(
    name="symmetric_self_attention", paper="tomihari2025jacobians", kind="gradient", on_sphere=True,
    equation=Equation(r"E = -\frac{1}{2\beta}\sum_{ij} e^{\beta x_i^\top A x_j},\ A = A^\top",
                      r"P_{x_i}\Big(\sum_j e^{\beta x_i^\top A x_j} A x_j\Big)"),
    energy=lambda x, A, beta: en.symmetric_attention_energy(x, A, beta),
    update=op.symmetric_attention_update, sample=_sample_symmetric,
    note="Exact tangent gradient with W_V = A = W_QW_Kᵀ symmetric (Prop. 4.1); softmax SA is a positively "
    "rescaled version, still a descent direction.",
))

# ----------------------------------------------------------------------------- Hyper-SET (paper 004)
_HYPERSET_NOTE = "Exact gradient of the unconstrained energy; the layer evaluates it at RMS-normalised projections."
register(AttentionForm(
    name="hyperset_attention", paper="hu2025hyperset", kind="gradient",
    equation=Equation(r"E_{ATTN} = \beta^{-1}\sum_h\sum_i\log\sum_j e^{\beta z_i^{h\top} z_j^h}",
                      r"-\sum_h W_h Z^h(\mathrm{softmax}_{col} + \mathrm{softmax}_{row})(\beta Z^{h\top}Z^h)"),
    energy=hs.hyperset_attention_energy, update=hs.hyperset_attention_update, sample=_sample_hyperset,
    note=_HYPERSET_NOTE,
))
register(AttentionForm(
    name="sigmoid_attention", paper="hu2025hyperset", kind="gradient",
    equation=Equation(r"E = \tfrac{1}{2\beta}\sum_h\sum_{ij}\sigma(\beta z_i^{h\top} z_j^h)",
                      r"-\sum_h W_h Z^h\,\sigma'(\beta Z^{h\top}Z^h)"),
    energy=hs.sigmoid_attention_energy, update=hs.sigmoid_attention_update, sample=_sample_hyperset,
    note=_HYPERSET_NOTE,
))
register(AttentionForm(
    name="kernel_linear_attention", paper="hu2025hyperset", kind="gradient",
    equation=Equation(r"E = \tfrac{\beta}{4}\sum_h\sum_{ij}(\Phi(z_i^h)^\top\Phi(z_j^h))^2",
                      r"-\sum_h W_h\,\Phi'(Z^h)\odot\beta\,\Phi(Z^h)\Phi(Z^h)^\top\Phi(Z^h)"),
    energy=hs.kernel_linear_attention_energy, update=hs.kernel_linear_attention_update, sample=_sample_hyperset,
    note=_HYPERSET_NOTE + " Φ = sigmoid; cost linear in N.",
))
register(AttentionForm(
    name="hyperset_feedforward", paper="hu2025hyperset", kind="gradient",
    equation=Equation(r"E_{FF} = -\tfrac12\sum_i\sum_m \mathrm{ReLU}(d_m^\top x_i)^2",
                      r"D\,\mathrm{ReLU}(D^\top x_i)"),
    energy=hs.hyperset_feedforward_energy, update=hs.hyperset_feedforward_update, sample=_sample_ff,
    note=_HYPERSET_NOTE,
))
register(AttentionForm(
    name="softmax_feedforward", paper="hu2025hyperset", kind="gradient",
    equation=Equation(r"E = -\sum_i\log\sum_m e^{d_m^\top x_i}", r"D\,\mathrm{softmax}(D^\top x_i)"),
    energy=hs.softmax_feedforward_energy, update=hs.softmax_feedforward_update, sample=_sample_ff,
    note=_HYPERSET_NOTE,
))
register(AttentionForm(
    name="gated_feedforward", paper="hu2025hyperset", kind="gradient",
    equation=Equation(r"E = -\tfrac12\sum_i\Big(\sum_m\Phi(d_m^\top x_i)\Big)^2",
                      r"D\Big[\Big(\sum_m\Phi(d_m^\top x_i)\Big)\Phi'(D^\top x_i)\Big]"),
    energy=hs.gated_feedforward_energy, update=hs.gated_feedforward_update, sample=_sample_ff,
    note=_HYPERSET_NOTE + " Φ = sigmoid.",
))
