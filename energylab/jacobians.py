"""The Jacobian view of a recurrent step x ← f(x): one-step Jacobian, spectral norm, eigenvalues, Lyapunov spectrum.

Tomihari & Karakida (paper 003) study looped self-attention, X⁽ᵗ⁺¹⁾ = f(X⁽ᵗ⁾), through the Jacobian of one step,

    J(x) = ∂ vec f(X) / ∂ vec X   (n × n, n = numel(X)),

and through the Lyapunov spectrum of the trajectory x_{t+1} = f(x_t): with J⁽ᵀ⁾ = J(x_{T-1}) ··· J(x_0),

    λ_i = lim_T (1/2T) ln α_i,   α_i the eigenvalues of J⁽ᵀ⁾ᵀ J⁽ᵀ⁾   (eqs. 89-91; (1/T) ln σ_i(J⁽ᵀ⁾)).

The product is never formed: an orthonormal frame Q is pushed through each Jacobian by forward-mode products
(jvp) and re-orthonormalised, Q_{t+1} R_{t+1} = J(x_t) Q_t, and λ_i ≈ (1/T) Σ_t ln |(R_t)_ii| (Benettin et al.
1980). For finite T these are (1/T) ln |diag R| of the QR factorisation of J⁽ᵀ⁾ Q_0: their sum equals the sum of
the (1/T) ln σ_i exactly, each one converges to the same limit as T grows.

Also here: the pseudo-energy −Tr(XᵀY), Y = C + MSA(X), of AKOrN (Miyato et al. 2025), and paper 003's contribution
index of the top eigenspace (Sec. 6.3; our copy lost its formula, see :func:`contribution_index`).

A step is any callable ``step(x) -> tensor of the shape of x``, differentiable by torch.func (no in-place
writes to x, no data-dependent Python branching on values). The state x may have any shape, e.g. tokens (N, d):
every Jacobian here is over the flattened state, n = x.numel().
"""
from __future__ import annotations

import torch
from torch.func import jacrev, jvp, vjp, vmap

from energylab._checks import check_dtype, check_int, check_positive, check_tensor, value_checks_off

__all__ = ["step_jacobian", "jacobian_eigenvalues", "spectral_norm", "lyapunov_spectrum", "pseudo_energy",
           "contribution_index", "check_finite_matrix"]


# ----------------------------------------------------------------------------- validation
def _check_step(step, x, names: tuple[str, str] = ("step", "x")) -> torch.Tensor:
    """Check step and x; returns x. The step must map x to a tensor of the same shape (ValueError naming step)."""
    step_name, x_name = names
    if not callable(step):
        raise ValueError(f"{step_name} must be a callable x -> f(x), got {type(step).__name__}")
    check_tensor(x_name, x)
    check_dtype(x_name, x, (torch.float32, torch.float64), "Jacobians, eigenvalues and QR need float32 or better")
    if x.numel() == 0:
        raise ValueError(f"{x_name} must hold at least one entry, got shape {tuple(x.shape)}")
    with torch.no_grad():
        y = step(x)
    if not isinstance(y, torch.Tensor) or y.shape != x.shape:
        shown = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        raise ValueError(f"{step_name} must return a tensor of the shape of {x_name} {tuple(x.shape)}, got {shown}")
    check_tensor(f"{step_name}({x_name})", y)  # a step that returns NaN or inf has no Jacobian to speak of
    return x


def check_finite_matrix(name: str, A: torch.Tensor) -> torch.Tensor:
    """A, if every entry is finite; else ValueError naming it. Checked before LAPACK's eigensolvers: a NaN matrix
    crashed the process there (a segfault through MKL) and an infinite one hung it."""
    if not bool(torch.isfinite(A).all()):
        raise ValueError(f"{name} has NaN or infinite entries, so it has no eigenvalues to compute; every entry "
                         f"must be finite")
    return A


def _flat(step, shape):
    """The step as a map of flat vectors: v (n,) -> vec step(v.reshape(shape)) (n,)."""
    return lambda v: step(v.reshape(shape)).reshape(-1)


# ----------------------------------------------------------------------------- one step
def step_jacobian(step, x: torch.Tensor) -> torch.Tensor:
    """J = ∂ vec step(x) / ∂ vec x at x, by reverse-mode autograd (torch.func.jacrev): x (any shape) -> (n, n).

    n = x.numel(); rows index the output, columns the input, both flattened in row-major order.
    """
    _check_step(step, x)
    return _step_jacobian(step, x)


def _step_jacobian(step, x: torch.Tensor) -> torch.Tensor:
    return jacrev(_flat(step, x.shape))(x.detach().reshape(-1))


def jacobian_eigenvalues(step, x: torch.Tensor) -> torch.Tensor:
    """Eigenvalues of the one-step Jacobian J(x) (forms the n × n matrix: small states): complex (n,).

    Sorted by descending modulus. On the unit circle |λ| = 1 a linearised step neither grows nor shrinks a
    direction (paper 003, Sec. 5.2: x ← x + Ωx has |λ| = √(1+ω²) > 1, normalisation brings it back to ≈ 1).
    """
    _check_step(step, x)
    eig = torch.linalg.eigvals(check_finite_matrix("the Jacobian of step at x", _step_jacobian(step, x)))
    return eig[torch.argsort(eig.abs(), descending=True, stable=True)]


def spectral_norm(step, x: torch.Tensor, iters: int = 200, tol: float = 1e-12,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """σ_max(J(x)) = ‖J(x)‖₂ by power iteration on JᵀJ, never forming J: a 0-dim tensor.

    Each iteration costs one jvp (u = J v) and one vjp (w = Jᵀ u): v ← w/‖w‖, σ = ‖J v‖; it stops after ``iters``
    iterations or when σ changes by less than ``tol`` relative. The error of σ² decays like (σ₂/σ₁)^{4t}.
    The start v is Gaussian, drawn from ``generator`` (a fresh one seeded 0 when None: deterministic).
    """
    _check_step(step, x)
    iters = check_int("iters", iters, minimum=1)
    tol = check_positive("tol", tol, allow_zero=True, scalar=True)
    return _spectral_norm(step, x, iters, tol, generator)


def _spectral_norm(step, x, iters, tol, generator):
    f = _flat(step, x.shape)
    v0 = x.detach().reshape(-1)
    _, pullback = vjp(f, v0)
    gen = torch.Generator(device=x.device).manual_seed(0) if generator is None else generator
    v = torch.randn(v0.shape, generator=gen, dtype=x.dtype, device=x.device)
    v = v / v.norm()
    sigma = torch.zeros((), dtype=x.dtype, device=x.device)
    for _ in range(iters):
        u = jvp(f, (v0,), (v,))[1]  # J v
        previous, sigma = sigma, u.norm()
        if sigma == 0:  # J v = 0: v is in the kernel; J = 0 or an unlucky start
            break
        w = pullback(u)[0]  # Jᵀ J v
        v = w / w.norm()
        if abs(sigma - previous) <= tol * sigma:
            break
    return sigma.detach()


# ----------------------------------------------------------------------------- Lyapunov spectrum
def lyapunov_spectrum(step, x0: torch.Tensor, steps: int, k: int | None = None, warmup: int = 0,
                      return_state: bool = False, generator: torch.Generator | None = None):
    """Lyapunov exponents of x_{t+1} = step(x_t) from x0, by repeated QR: (k,) sorted descending.

    For t = 0 .. steps-1: Z = J(x_t) Q_t by jvp (one per column, vmapped), Q_{t+1} R_{t+1} = Z (reduced QR),
    x_{t+1} = step(x_t); then λ_i = (1/steps) Σ_t ln |(R_t)_ii|. The frame starts at Q_0 = I (all n directions,
    k = None) or, for the top k < n exponents, at a random orthonormal n × k frame from ``generator``. The product
    of Jacobians is never formed, so long horizons neither overflow nor underflow.

    Finite T: the exponents are (1/T) ln |diag R| of the QR factorisation of J⁽ᵀ⁾ Q_0. Their sum equals
    (1/T) Σ ln σ_i(J⁽ᵀ⁾) (k = n), but each differs from (1/T) ln σ_i(J⁽ᵀ⁾) by O(1/T), a transient set by the start
    frame (for x ← A x, A symmetric with a random eigenbasis: about 0.01-0.02 at T = 300). ``warmup`` steps run
    first without being counted: the frame aligns with the Lyapunov vectors and the transient is removed.

    x0: any shape, n = x0.numel(); steps >= 1; warmup >= 0; 1 <= k <= n. Returns the exponents, or (exponents, x)
    with ``return_state``, x the state after warmup + steps steps. A direction the step annihilates (e.g. the
    radial one under a normalisation) gives −inf or a large negative round-off value. Cost: (warmup + steps)·k jvps.
    """
    _check_step(step, x0, ("step", "x0"))
    steps = check_int("steps", steps, minimum=1)
    warmup = check_int("warmup", warmup, minimum=0)
    n = x0.numel()
    if k is not None:
        k = check_int("k", k, minimum=1)
        if k > n:
            raise ValueError(f"k must be at most the state size n = {n}, got {k}")
    exponents, x = _lyapunov_spectrum(step, x0, steps, k, warmup, generator)
    return (exponents, x) if return_state else exponents


def _lyapunov_spectrum(step, x0, steps, k, warmup, generator):
    n, like = x0.numel(), dict(dtype=x0.dtype, device=x0.device)
    f = _flat(step, x0.shape)
    if k is None or k == n:
        Q = torch.eye(n, **like)
    else:
        gen = torch.Generator(device=x0.device).manual_seed(0) if generator is None else generator
        Q = torch.linalg.qr(torch.randn(n, k, generator=gen, **like))[0]
    x = x0.detach().reshape(-1)
    total = torch.zeros(Q.shape[1], **like)
    push = vmap(lambda v, at: jvp(f, (at,), (v,))[1], in_dims=(1, None), out_dims=1)  # (n, k) -> J (n, k)
    for t in range(warmup + steps):
        Q, R = torch.linalg.qr(push(Q, x))
        if t >= warmup:
            total = total + torch.log(torch.diagonal(R).abs())
        with torch.no_grad():
            x = f(x)
        if not value_checks_off() and not torch.isfinite(x).all():
            raise ValueError(f"the state is NaN or inf after {t + 1} steps of step: the map diverges from x0 "
                             f"(its exponents are not finite); start closer to its attractor or use fewer steps")
    exponents = torch.sort(total / steps, descending=True).values
    return exponents, x.reshape(x0.shape)


# ----------------------------------------------------------------------------- pseudo-energy
def pseudo_energy(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """E_pseudo = −Tr(XᵀY) = −Σ_{i,a} X_ia Y_ia, with Y = C + MSA(X) (AKOrN; paper 003, Sec. 6.3): (..., N, d) -> (...).

    X, Y: tokens (..., N, d) of the same shape (Y the pre-normalisation drive of the step).
    """
    check_tensor("X", X)
    check_tensor("Y", Y)
    if X.dim() < 2:
        raise ValueError(f"X must have shape (..., N, d), got {tuple(X.shape)}")
    if Y.shape != X.shape:
        raise ValueError(f"Y must have the shape of X {tuple(X.shape)}, got {tuple(Y.shape)}")
    return _pseudo_energy(X, Y)


def _pseudo_energy(X, Y):
    return -(X * Y).sum((-2, -1))


def contribution_index(drive, X: torch.Tensor, k: int = 1) -> torch.Tensor:
    """Share of the state in the top-k eigenspace of the symmetrised Jacobian of the drive: a 0-dim tensor in [0, 1].

    ``drive``: the map X ↦ Y = C + MSA(X) (the part of the step inside the normalisation); X: any shape, n = numel.

    Reconstruction (paper 003, Sec. 6.3; our text copy lost the formulas). The paper approximates Y by the
    Jacobian applied to the state, vec Y ≈ J x with x = vec X and J = ∂ vec Y / ∂ vec X (C is constant, so
    it drops out of J), so that, neglecting a constant term, E_pseudo = −Tr(XᵀY) ≈ −xᵀ J x = −xᵀ S x with the
    symmetric S = (J + Jᵀ)/2. It expands x = Σ_i c_i v_i in the orthonormal eigenbasis of S, eigenvalues
    μ_1 ≥ μ_2 ≥ ... ≥ μ_n, and calls the share of the state in the top eigenspace the contribution index:

        CI_k = Σ_{i ≤ k} c_i² / Σ_i c_i² = ‖P_k x‖² / ‖x‖²,   P_k the projector on span(v_1, ..., v_k).

    A low pseudo-energy means x concentrated on the large positive μ_i; along AKOrN's inference CI rises towards 1
    (a power iteration restricted to positive eigenvalues). The choice of k (and the symmetrisation of J) is our
    reading. Forms the n × n Jacobian: small states only.
    """
    _check_step(drive, X, ("drive", "X"))
    k = check_int("k", k, minimum=1)
    if k > X.numel():
        raise ValueError(f"k must be at most the state size n = {X.numel()}, got {k}")
    if not X.any():
        raise ValueError("X must be non-zero: the share of a zero state is undefined")
    return _contribution_index(drive, X, k)


def _contribution_index(drive, X, k):
    J = check_finite_matrix("the Jacobian of drive at X", _step_jacobian(drive, X))
    vectors = torch.linalg.eigh((J + J.T) / 2).eigenvectors.flip(-1)  # columns by descending eigenvalue
    c = vectors.T @ X.detach().reshape(-1)
    return (c[:k].square().sum() / c.square().sum()).detach()
