"""Tokens as particles on the sphere: the self-attention flows SA and USA, and their integrators.

Geshkovski, Letrouit, Polyanskiy & Rigollet (2023), *A mathematical perspective on transformers*, model a deep
Transformer with normalised residual attention as n particles x_1, ..., x_n on the unit sphere S^{d-1} moving by

    SA:   dx_i/dt = P_{x_i}( sum_h (1/Z_{h,i}) sum_j exp(beta <Q_h x_i, K_h x_j>) V_h x_j ),
    USA:  dx_i/dt = P_{x_i}( sum_h (1/n)       sum_j exp(beta <Q_h x_i, K_h x_j>) V_h x_j ),

with P_x y = y - <x, y> x the projection on the tangent space at x and Z_{h,i} = sum_k exp(beta <Q_h x_i, K_h x_k>).
Causal masking (Karagodin, Polyanskiy & Rigollet 2024) restricts the sums to j <= i (Z_{h,i} too).

When every head has V_h = Q_h^T K_h symmetric (e.g. Q = K = V = I), the interaction energy

    E_beta(x) = (1 / (2 beta n^2)) sum_h sum_{i,j} exp(beta <Q_h x_i, K_h x_j>)

increases along USA with any number of heads: USA is exactly its gradient ascent, dx_i/dt = n grad_{x_i} E_beta
(the Riemannian gradient on the sphere). Along SA, dE_beta/dt >= 0 with ONE head (Geshkovski et al. 2023, Sec. 3:
the velocity is the gradient times n^2/Z_i > 0). With several heads SA is not monotone: head h's term is divided
by its own Z_{h,i}, the velocity is not a positive multiple of the gradient, and E_beta falls at some states
(chapter 6; :func:`energylab.forms.sphere.energy_rate`). With one head and V = A = A^T this is the energy of
paper 003 (Tomihari & Karakida), written there with the opposite sign, E = -(1/(2 beta)) sum exp(beta x_i^T A x_j);
their Prop. 4.1 is the same condition for factored weights (W_Q W_K^T = A = A^T, W_V = A), not a weaker one.

The energy is the catalog form ``sphere_interaction`` (:func:`energylab.forms.sphere.sphere_interaction_energy`,
multi-head through its Q, K); the geometry (tangent projection, normalisation, random tokens) and the observables
live in :mod:`energylab.sphere`.

Speed: the default integrator (float64, PyTorch's attention kernel) is the reference the website's JavaScript explorer
and the tests compare against. For long or large runs, float32 tokens with ``FlowConfig(fused=True)`` take one
kernel call per Euler step: where every head's Q_hᵀK_h is symmetric and there is no mask (the identity, symmetric
and antisymmetric presets), a C kernel that computes each exponential once for the pairs (i, j) and (j, i)
(:mod:`energylab.kernels.sphere_symmetric`, compiled in about 0.5 s); otherwise one ``torch.compile``'d step
(:mod:`energylab.kernels.sphere_fused`, a few seconds to compile). :func:`fused_way` says which. Speeds and the float32
error against float64 at 1,024 tokens and 1,000 steps: ``python -m energylab.bench sphere``.

Shapes: B batch, N tokens (particles), d dimension, H heads, d_h query/key width per head, S saved states.
Tokens are (B, N, d); weights Q, K are (H, d_h, d) and V is (H, d, d).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from energylab import kernels
from energylab._checks import (
    check_count,
    check_divides,
    check_instance,
    check_int,
    check_overflow,
    check_positive,
    check_tensor,
)
from energylab.forms.sphere import sphere_interaction_energy
from energylab.kernels import sphere_fused, sphere_symmetric
from energylab.sphere import normalize, random_tokens, unit_tangent_projection

UNIT_TOL = 1e-5  # how far from norm 1 an initial token may be (float32 round-off is ~1e-7)


@dataclass(frozen=True)
class SphereWeights:
    """Per-head attention matrices of the particle system: Q, K of shape (H, d_h, d), V of shape (H, d, d)."""

    Q: torch.Tensor
    K: torch.Tensor
    V: torch.Tensor

    def __post_init__(self):
        check_tensor("Q", self.Q, ndim=3)
        check_tensor("K", self.K, ndim=3)
        check_tensor("V", self.V, ndim=3)
        if self.K.shape != self.Q.shape:
            raise ValueError(f"K must have the shape of Q {tuple(self.Q.shape)}, got {tuple(self.K.shape)}")
        H, _, d = self.Q.shape
        if self.V.shape != (H, d, d):
            raise ValueError(f"V must have shape (H, d, d) = {(H, d, d)}, got {tuple(self.V.shape)}")

    @property
    def dim(self) -> int:
        return self.Q.shape[-1]

    @property
    def heads(self) -> int:
        return self.Q.shape[0]

    def to(self, like: torch.Tensor) -> "SphereWeights":
        """The same weights with the dtype and device of ``like``."""
        cast = lambda w: w.to(dtype=like.dtype, device=like.device)  # noqa: E731
        return SphereWeights(cast(self.Q), cast(self.K), cast(self.V))


PRESETS = ("identity", "symmetric", "random", "antisymmetric")


def preset_weights(name: str, d: int, heads: int = 1, seed: int = 0, dtype=torch.float64) -> SphereWeights:
    """Named weight choices used in the chapter.

    - ``identity``: head h sees and moves only its block of d/H coordinates: Q_h = K_h = P_h (the block's rows
      of I), V_h = P_h^T P_h; with one head Q = K = V = I. V_h = Q_h^T K_h, so E_beta increases along USA, and
      along SA with one head only (with several heads SA's per-head normalisers break monotonicity).
    - ``symmetric``: Q_h = P_h, K_h = P_h A_h, V_h = P_h^T P_h A_h with A_h = I + S_h, S_h a random symmetric
      matrix supported on the block; V_h = Q_h^T K_h is symmetric, so the energy still increases (USA; SA with one
      head).
    - ``random``: Gaussian Q_h, K_h, V_h scaled by 1/sqrt(d); no energy in general.
    - ``antisymmetric``: identity Q, K and V_h = P_h^T P_h (I + 3 Omega), Omega antisymmetric with spectral norm 1:
      the antisymmetric part makes tokens rotate instead of settling (compare paper 003's oscillators).
    """
    if name not in PRESETS:
        raise ValueError(f"name must be one of {PRESETS}, got {name!r}")
    d = check_int("d", d, minimum=2)
    heads = check_divides("heads", heads, d)
    gen = torch.Generator().manual_seed(seed)
    d_h = d // heads
    eye = torch.eye(d, dtype=dtype)
    P = eye.reshape(heads, d_h, d)  # (H, d_h, d): head h's block of rows of I
    block = P.transpose(1, 2) @ P  # (H, d, d): projection on head h's coordinates
    if name == "identity":
        return SphereWeights(P, P.clone(), block)
    if name == "symmetric":
        G = torch.randn(heads, d, d, generator=gen, dtype=dtype)
        A = eye + block @ (G + G.transpose(1, 2)) @ block / (2 * math.sqrt(d_h))  # (H, d, d), symmetric
        return SphereWeights(P, P @ A, block @ A)
    if name == "random":
        Q, K = torch.randn(2, heads, d_h, d, generator=gen, dtype=dtype) / math.sqrt(d)
        V = torch.randn(heads, d, d, generator=gen, dtype=dtype) / math.sqrt(d)
        return SphereWeights(Q, K, V)
    G = torch.randn(d, d, generator=gen, dtype=dtype)
    omega = (G - G.T) / torch.linalg.matrix_norm(G - G.T, ord=2)  # antisymmetric, ||Omega||_2 = 1
    return SphereWeights(P, P.clone(), block @ (eye + 3.0 * omega))


def _check_tokens(name: str, x) -> torch.Tensor:
    check_tensor(name, x, ndim=3)
    check_count(name, x, 1)
    return x


def _check_beta(beta, allow_zero: bool) -> float:
    return check_positive("beta", beta, allow_zero=allow_zero, scalar=True)


_USA_EXP = "exp(beta⟨Q_h x_i, K_h x_j⟩) of the unnormalised flow (USA)"


def _check_match(x: torch.Tensor, weights: SphereWeights) -> SphereWeights:
    if not isinstance(weights, SphereWeights):
        raise TypeError(f"weights must be a SphereWeights, got {type(weights).__name__}")
    if weights.dim != x.shape[-1]:
        raise ValueError(f"weights: token dimension must be {x.shape[-1]}, got {weights.dim}")
    return weights.to(x)


def velocity(x: torch.Tensor, weights: SphereWeights, beta: float, normalized: bool = True,
             causal: bool = False) -> torch.Tensor:
    """dx/dt of SA (``normalized=True``) or USA (``False``) at tokens x: (B, N, d) -> (B, N, d), tangent to S^{d-1}.

    The SA weights 1/Z_{h,i} exp(.) are a softmax, computed by PyTorch's fused attention kernel with scale beta
    (finite for any beta). USA's are not normalised: where exp(beta⟨Q_h x_i, K_h x_j⟩) overflows the dtype
    (beta ≳ 709 in float64 with unit tokens and Q = K = I) the velocity is not representable, a ValueError.
    """
    _check_tokens("x", x)
    beta = _check_beta(beta, allow_zero=True)
    v = _velocity(x, _check_match(x, weights), beta, normalized, causal)
    if not normalized:
        check_overflow("beta", beta, v, _USA_EXP)
    return v


def _velocity(x: torch.Tensor, w: SphereWeights, beta: float, normalized: bool, causal: bool) -> torch.Tensor:
    """``velocity`` without input checks, for the integrator's inner loop."""
    n = x.shape[1]
    xs = x.unsqueeze(1)  # (B, 1, N, d), broadcast over heads; matmul dispatches faster than einsum here
    q = xs @ w.Q.transpose(1, 2)  # (B, H, N, d_h): Q_h x_i
    key = xs @ w.K.transpose(1, 2)  # (B, H, N, d_h): K_h x_j
    v = xs @ w.V.transpose(1, 2)  # (B, H, N, d): V_h x_j
    if normalized:
        y = F.scaled_dot_product_attention(q, key, v, is_causal=causal, scale=beta)  # (B, H, N, d)
    else:
        a = torch.exp(beta * q @ key.transpose(-1, -2))  # (B, H, N, N): exp(beta <Q_h x_i, K_h x_j>)
        if causal:
            a = a.tril()  # keep j <= i
        y = a @ v / n  # (B, H, N, d)
    return unit_tangent_projection(x, y.sum(1))  # x is unit: simulate checked x0 and renormalises


def energy(x: torch.Tensor, beta: float, weights: SphereWeights | None = None) -> torch.Tensor:
    """E_beta(x) = 1/(2 beta n^2) sum_h sum_ij exp(beta <Q_h x_i, K_h x_j>): (..., N, d) -> (...).

    The catalog's energy :func:`energylab.forms.sphere.sphere_interaction_energy` with the Q, K of ``weights``
    (without weights, Q = K = I and one head). Geshkovski et al. (2023), Sec. 3.
    """
    check_tensor("x", x)
    beta = _check_beta(beta, allow_zero=False)
    if weights is None:
        return sphere_interaction_energy(x, beta)
    w = _check_match(x, weights)
    return sphere_interaction_energy(x, beta, w.Q, w.K)


@dataclass
class FlowConfig:
    """How to integrate a particle flow."""

    beta: float = 1.0  # inverse temperature: larger beta, sharper attention, slower merging
    normalized: bool = True  # True: SA (softmax, the Transformer); False: USA (the energy's gradient ascent)
    causal: bool = False  # decoder-style masking: token i attends to j <= i
    step: float = 0.1  # time step h; the layer count of the Transformer is steps
    steps: int = 100  # number of steps; total time steps * step
    method: str = "euler"  # "euler" (x + h v, renormalised) or "rk4" (RK4 in R^d, renormalised)
    save_every: int = 1  # keep one state in this many steps
    fused: bool = False  # Euler only: one kernel call per step (fused_way: kernels.sphere_*); use float32


@dataclass
class Trajectory:
    """Saved states of a flow: their times (S,) and the tokens x (S, B, N, d)."""

    times: torch.Tensor
    x: torch.Tensor


def _flow_step(x: torch.Tensor, w: SphereWeights, config: FlowConfig) -> torch.Tensor:
    """One step of the integrator; the result lies on the sphere up to round-off.

    Euler: x <- N(x + h v(x)) is the Transformer layer itself (residual attention, then normalisation).
    RK4: the classical scheme on the ambient ODE in R^d, whose flow keeps ||x_i|| = 1, followed by the same
    normalisation (a projection method, Hairer, Lubich & Wanner, Geometric Numerical Integration, IV.4): order 4.
    """
    f = lambda y: _velocity(y, w, config.beta, config.normalized, config.causal)  # noqa: E731
    h = config.step
    if config.method == "euler":
        return normalize(x + h * f(x))
    k1 = f(x)
    k2 = f(x + h / 2 * k1)
    k3 = f(x + h / 2 * k2)
    k4 = f(x + h * k3)
    return normalize(x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4))


def simulate(x0: torch.Tensor, weights: SphereWeights, config: FlowConfig) -> Trajectory:
    """Integrate the flow from tokens x0 (B, N, d) on the sphere; returns every ``save_every``-th state.

    SA is finite for any beta. USA's velocity grows like exp(beta): where it overflows the dtype (Euler: beta ≳ 709
    in float64 with Q = K = I; RK4, whose stages leave the sphere by step·|v|, much sooner) a ValueError names
    beta and step instead of returning NaN tokens.
    """
    _check_tokens("x0", x0)
    check_instance("config", config, FlowConfig, "build one with FlowConfig(**settings)")
    config = dataclasses.replace(
        config, beta=_check_beta(config.beta, allow_zero=True), step=check_positive("step", config.step, scalar=True),
        steps=check_int("steps", config.steps, minimum=0), save_every=check_int("save_every", config.save_every, 1))
    if config.method not in ("euler", "rk4"):
        raise ValueError(f"method must be 'euler' or 'rk4', got {config.method!r}")
    off = (torch.linalg.vector_norm(x0, dim=-1) - 1).abs().max()
    if off > UNIT_TOL:
        raise ValueError(f"x0 must lie on the unit sphere (|‖x_i‖ - 1| <= {UNIT_TOL}), got {float(off):.3g}; "
                         "use energylab.sphere.normalize")
    w = _check_match(x0, weights)
    if config.fused and config.method != "euler":
        raise ValueError(f"fused=True integrates with method='euler' only, got method={config.method!r}")
    step = _fast_step(x0, w, config) if config.fused else _flow_step
    x, saved, times = x0, [x0], [0]
    for s in range(1, config.steps + 1):
        x = step(x, w, config)
        if s % config.save_every == 0:
            saved.append(x)
            times.append(s)
    if not config.normalized and not torch.isfinite(x).all():
        raise ValueError(_usa_overflow_message(config, x.dtype))
    times = torch.tensor(times, dtype=x0.dtype, device=x0.device) * config.step
    return Trajectory(times=times, x=torch.stack(saved))  # (S,), (S, B, N, d)


def _fast_step(x0: torch.Tensor, w: SphereWeights, config: FlowConfig):
    """The step ``fused=True`` takes, as a ``(x, w, config) -> x`` like :func:`_flow_step`: the symmetric C kernel,
    else the compiled fused step, else :func:`_flow_step` itself. Whatever does not run says why in ONE warning
    (:class:`energylab.kernels.FastPathWarning`); both fast paths' contract: :data:`energylab.kernels.FAST_PATHS`.
    """
    way, why = _fused_route(x0, w, config)
    if way == "unfused":
        kernels.fall_back("sphere-fused", why)
        return _flow_step
    failed = []
    if way == "symmetric":
        step, err = _symmetric_stepper(x0, w, config)
        if step is not None:
            return step
        failed.append(f"the symmetric sphere step could not be built ({err})")
    step, err = _fused_stepper(x0, w, config)
    if step is not None:
        if failed:
            kernels.fall_back("sphere-symmetric", failed[0], instead="sphere-fused")
        return step
    failed.append(f"torch.compile could not build the fused sphere step ({err})")
    kernels.fall_back("sphere-fused", "; ".join(failed))
    return _flow_step


def _fused_stepper(x0: torch.Tensor, w: SphereWeights, config: FlowConfig):
    """The Euler step of :mod:`energylab.kernels.sphere_fused` as a ``(x, w, config) -> x`` and None, or None and
    the error that stopped ``torch.compile`` from building it (no C++ compiler, a broken one, an unwritable cache
    folder).

    It works on tokens stored coordinates first, (B, d, N); the (B, N, d) states it returns are transposed views.
    """
    beta, h = (torch.tensor(v, dtype=x0.dtype, device=x0.device) for v in (config.beta, config.step))

    def fused(x, w, config):  # x (B, N, d) -> x.mT (B, d, N) -> one kernel -> back as a (B, N, d) view
        xt = x.transpose(-1, -2).contiguous()  # a no-op from the second step on: x is a view of a (B, d, N) tensor
        return kernel(xt, w.Q, w.K, w.V, beta, h, config.normalized, config.causal).transpose(-1, -2)

    try:  # everything that builds: the cache folders, torch.compile itself, and the first call for this shape
        problem = kernels.cache_problem()
        if problem is not None:
            raise OSError(problem)
        kernel = sphere_fused.compiled_euler_step()
        fused(x0, w, config)
    except Exception as err:  # noqa: BLE001 - any build failure: the caller falls back
        return None, f"{type(err).__name__}: {err}"
    return fused, None


def fused_way(x0: torch.Tensor, weights: SphereWeights, config: FlowConfig) -> str:
    """Which step ``fused=True`` takes for these tokens, weights and config (before any compiler failure).

    ``"symmetric"``: every head's Q_hᵀK_h is symmetric, no causal mask, CPU tokens in float32 or float64
    (:mod:`energylab.kernels.sphere_symmetric`, half the exponentials); ``"fused"``: the compiled step of
    :mod:`energylab.kernels.sphere_fused`; ``"unfused"``: the reference step, where the fused steps cannot run: SA
    where the shift could underflow a row, a dtype other than float32/float64, a device other than CPU/CUDA, and
    whenever autograd records a graph (tokens or weights requiring grad): the fused kernels record no gradients, so
    ``fused=True`` then integrates with the reference step and gives its gradients
    (:data:`energylab.kernels.FAST_PATHS`).
    """
    return _fused_route(x0, _check_match(x0, weights), config)[0]


def _fused_route(x0: torch.Tensor, w: SphereWeights, config: FlowConfig) -> tuple[str, str | None]:
    """:func:`fused_way`'s answer and, for ``"unfused"``, why."""
    why = kernels.unsupported("sphere-fused", x0, w.Q, w.K, w.V)
    if why is not None:
        return "unfused", why
    if config.normalized and not sphere_fused.shift_is_safe(w.Q, w.K, config.beta, x0.dtype):
        return "unfused", (f"beta={config.beta:g} is too large for the fused steps' softmax shift in {x0.dtype} "
                           "(energylab.kernels.sphere_fused.shift_is_safe)")
    symmetric = (not config.causal and kernels.unsupported("sphere-symmetric", x0) is None
                 and sphere_symmetric.symmetric_scores(w.Q, w.K) is not None)
    return ("symmetric" if symmetric else "fused"), None


def _symmetric_stepper(x0: torch.Tensor, w: SphereWeights, config: FlowConfig):
    """The Euler step of :mod:`energylab.kernels.sphere_symmetric` as a ``(x, w, config) -> x`` and None (where
    ``fused_way`` says "symmetric"), or None and the error that stopped the C compiler from building it."""
    try:
        one_step = sphere_symmetric.stepper(x0, sphere_symmetric.symmetric_scores(w.Q, w.K), w.V, w.Q, w.K,
                                          config.beta, config.step, config.normalized)
    except Exception as err:  # noqa: BLE001 - any build failure: the caller falls back
        return None, f"{type(err).__name__}: {err}"

    def symmetric(x, w, config):  # x (B, N, d) -> x.mT (B, d, N) -> one C call -> back as a (B, N, d) view
        return one_step(x.transpose(-1, -2).contiguous()).transpose(-1, -2)

    return symmetric, None


def _usa_overflow_message(config: FlowConfig, dtype) -> str:
    limit = math.log(torch.finfo(dtype).max)
    msg = (f"beta={config.beta:g}, step={config.step:g}: {_USA_EXP} overflowed {dtype}; the safe range is "
           f"beta · max⟨Q_h x_i, K_h x_j⟩ < {limit:.1f} (the log of the largest {dtype})")
    if config.method == "rk4":
        msg += (", and with method='rk4' the stages x + step·k/2 leave the sphere, where the exponent grows with "
                "|x|², so step · |velocity| must stay small (|velocity| ~ exp(beta)): use a smaller beta or step, "
                "method='euler', or normalized=True")
    return msg


def simulate_preset(n: int = 64, beta: float = 1.0, preset: str = "identity", heads: int = 1, step: float = 0.1,
                    steps: int = 200, normalized: bool = True, causal: bool = False, seed: int = 0, d: int = 3,
                    batch: int = 1, hemisphere: bool = False, dtype=torch.float64, fused: bool = False) -> Trajectory:
    """One call from knobs to a trajectory: uniform tokens (``sphere.random_tokens``) moved by ``preset_weights``."""
    x0 = random_tokens(batch, n, d, seed=seed, hemisphere=hemisphere, dtype=dtype)
    config = FlowConfig(beta=beta, normalized=normalized, causal=causal, step=step, steps=steps, fused=fused)
    return simulate(x0, preset_weights(preset, d, heads=heads, seed=seed, dtype=dtype), config)


__all__ = ["SphereWeights", "PRESETS", "preset_weights", "velocity", "energy", "FlowConfig", "Trajectory", "simulate",
           "fused_way", "simulate_preset"]
