"""Bad input to the library (issue 13, item 5): a clear error naming the argument, or a finite, correct result.

Each group below is one kind of probe: empty token sets, all-zero inputs, large inverse temperatures, large
scores, fully masked rows, too few tokens for local attention, degenerate sizes, and the number types accepted
where a float (or an int) is expected.
"""
import math

import numpy as np
import pytest
import torch

from energylab import catalog, descent
from energylab import flows as fl
from energylab import modules as M
from energylab import sphere as sp
from energylab.forms import expressive as ea
from energylab.forms import free_energy as fe
from energylab.forms import hopfield as hf
from energylab.forms import hyperspherical as hs
from energylab.forms import local as lo
from energylab.forms import newton as nw
from energylab.forms import sphere as fs
from energylab.models import attractor as at

F64 = torch.float64
D, N = 4, 5


def _randn(*shape, seed=0, dtype=F64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _unit(*shape, seed=0, dtype=F64):
    x = _randn(*shape, seed=seed, dtype=dtype)
    return x / x.norm(dim=-1, keepdim=True)


Z, H, W = _randn(3, D, seed=1), _randn(N, D, seed=2), torch.eye(D, dtype=F64) + 0.1 * _randn(D, D, seed=3)
W1, W2 = _randn(2, 2, D, seed=4), _randn(2, 2, D, seed=5)
NO_KEYS = torch.zeros(0, D, dtype=F64)
W_HEADS = W.reshape(2, D // 2, D)  # multi-head weights (H, d_h, d), two heads
SYM = (lambda B: (B + B.T) / 2)(_randn(D, D, seed=6))


# ----------------------------------------------------------------------------- empty token sets
@pytest.mark.parametrize("call, name", [
    (lambda: fe.softmax_free_energy(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: fe.softmax_free_energy_update(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: fe.dot_product_free_energy(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: fe.dot_product_free_energy_update(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: fe.attention_step(Z, NO_KEYS, W, W, 1.0), "H"),
    (lambda: nw.att2nd_update(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: fe.linear_attention_energy(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: fe.multihead_free_energy(Z, NO_KEYS, W1, W2, 1.0), "H"),
    (lambda: nw.mha2nd1st_update(Z, NO_KEYS, W1, W2, 1.0), "H"),
    (lambda: ea.expressive_free_energy(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: ea.expressive_free_energy_update(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: ea.expressive_attention_step(Z, NO_KEYS, W, W), "H"),
    (lambda: hf.hopfield_energy(Z, NO_KEYS, 1.0), "X"),
    (lambda: hf.hopfield_update(Z, NO_KEYS, 1.0), "X"),
    (lambda: fe.boltzmann_weights(torch.zeros(3, 0, dtype=F64), 1.0), "E"),
    (lambda: fe.helmholtz_free_energy(torch.zeros(3, 0, dtype=F64), 1.0), "E"),
    (lambda: fe.dot_product_weights(torch.zeros(3, 0, dtype=F64)), "scores"),
    (lambda: ea.expressive_weights(torch.zeros(3, 0, dtype=F64)), "scores"),
    (lambda: fs.sphere_interaction_energy(NO_KEYS, 1.0), "x"),
    (lambda: fs.sphere_interaction_update(NO_KEYS, 1.0), "x"),
    (lambda: fs.symmetric_attention_update(NO_KEYS, SYM, 1.0), "x"),
    (lambda: hs.hyperset_attention_energy(NO_KEYS, W_HEADS, 1.0), "X"),
    (lambda: hs.hyperset_attention_update(NO_KEYS, W_HEADS, 1.0), "X"),
    (lambda: fl.energy(torch.zeros(1, 0, 3, dtype=F64), 1.0, fl.preset_weights("random", 3)), "x"),
])
def test_empty_token_sets_raise_naming_the_tokens(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must hold at least 1"):
        call()


# ----------------------------------------------------------------------------- all-zero inputs
def test_expressive_gradient_at_all_zero_scores_raises_and_energy_is_inf():
    zero = torch.zeros(3, D, dtype=F64)
    with pytest.raises(ValueError, match="^z: every score"):
        ea.expressive_free_energy_update(zero, H, W, 1.0)
    with pytest.raises(ValueError, match="^z: every score"):
        ea.expressive_free_energy_update(Z, H, torch.zeros(D, D, dtype=F64), 1.0)
    assert torch.equal(ea.expressive_free_energy(zero, H, W, 1.0), torch.full((3,), math.inf, dtype=F64))
    # the layer form attends to nothing: zero weights (documented), so EA(z) = z, no NaN
    assert torch.equal(ea.expressive_attention_step(zero, H, W, W), zero)
    # one query with all-zero scores is enough to raise; a single zero score is fine (the update is smooth there)
    s_one_zero = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=F64)
    H_orth = torch.tensor([[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]], dtype=F64)
    assert torch.isfinite(ea.expressive_free_energy_update(s_one_zero, H_orth, torch.eye(D, dtype=F64), 1.0)).all()


@pytest.mark.parametrize("call", [
    lambda x: sp.tangent_projection(x, _randn(*x.shape)),
    lambda x: sp.sphere_step(x, _randn(*x.shape), 0.1),
    lambda x: fs.sphere_interaction_update(x, 1.0),
    lambda x: fs.symmetric_attention_update(x, SYM, 1.0),
])
@pytest.mark.parametrize("which", ["all", "one"])
def test_zero_vectors_have_no_direction_on_the_sphere(call, which):
    x = torch.zeros(N, D, dtype=F64) if which == "all" else torch.cat([_unit(N - 1, D), torch.zeros(1, D, dtype=F64)])
    row = 0 if which == "all" else N - 1
    with pytest.raises(ValueError, match=rf"^x has a zero row at index \({row},\)"):
        call(x)


def test_rms_normalisation_of_a_zero_row_needs_eps():
    zero = torch.zeros(N, D, dtype=F64)
    with pytest.raises(ValueError, match="^u has a zero row"):
        hs.rms_normalize(zero)
    with pytest.raises(ValueError, match="^X has a zero row"):
        hs.hyperset_attention_update(zero, W_HEADS, 1.0, rms=True)
    with pytest.raises(ValueError, match="^X has a zero row"):
        hs.softmax_feedforward_update(zero, _randn(D, 9), rms=True)
    assert torch.equal(hs.rms_normalize(zero, 1e-6), zero)  # with eps > 0 a zero row stays zero
    assert torch.isfinite(hs.hyperset_attention_update(zero, W_HEADS, 1.0, rms=True, eps=1e-6)).all()


# ----------------------------------------------------------------------------- large beta
@pytest.mark.parametrize("call", [
    lambda x, b: fs.sphere_interaction_energy(x, b),
    lambda x, b: fs.sphere_interaction_update(x, b),
    lambda x, b: fs.symmetric_attention_energy(x, torch.eye(x.shape[-1], dtype=x.dtype), b),
    lambda x, b: fs.symmetric_attention_update(x, torch.eye(x.shape[-1], dtype=x.dtype), b),
    lambda x, b: fl.energy(x.unsqueeze(0), b),
    lambda x, b: fl.energy(x.unsqueeze(0), b, fl.preset_weights("identity", x.shape[-1], dtype=x.dtype)),
    lambda x, b: fl.velocity(x.unsqueeze(0), fl.preset_weights("identity", x.shape[-1], dtype=x.dtype), b,
                             normalized=False),
])
@pytest.mark.parametrize("dtype, ok, too_large", [(torch.float64, 700.0, 1e4), (torch.float32, 80.0, 100.0)])
def test_unnormalised_sphere_forms_overflow_names_beta_with_the_safe_range(call, dtype, ok, too_large):
    x = _unit(N, D, dtype=dtype)
    assert torch.isfinite(call(x, ok)).all()  # below log(max float) the exact value is representable
    limit = f"{math.log(torch.finfo(dtype).max):.1f}"
    with pytest.raises(ValueError, match=rf"^beta={too_large:g} is too large for {dtype}.*{limit}"):
        call(x, too_large)


def test_sphere_energy_near_the_overflow_limit_is_correct():
    x, beta = _unit(N, D), 700.0
    reference = torch.exp(torch.logsumexp(beta * (x @ x.T).flatten(), 0) - math.log(2 * beta * N * N))
    assert torch.allclose(fs.sphere_interaction_energy(x, beta), reference, rtol=1e-12, atol=0)


@pytest.mark.parametrize("method, beta", [("euler", 1e4), ("rk4", 1e4), ("rk4", 100.0)])
def test_usa_flow_overflow_names_beta_and_step(method, beta):
    x0, w = sp.random_tokens(2, 8, 3, seed=1), fl.preset_weights("random", 3)
    cfg = fl.FlowConfig(beta=beta, normalized=False, method=method, steps=20, step=0.1)
    pattern = rf"^beta={beta:g}, step=0.1: .*overflowed" + (".*rk4" if method == "rk4" else "")
    with pytest.raises(ValueError, match=pattern):
        fl.simulate(x0, w, cfg)
    sa = fl.simulate(x0, w, fl.FlowConfig(beta=beta, normalized=True, method=method, steps=20, step=0.1))
    assert torch.isfinite(sa.x).all()  # the normalised flow (softmax) is finite for any beta


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_sa_velocity_at_huge_beta_is_the_stable_softmax(dtype):
    x, w, beta = sp.random_tokens(2, 6, 3, seed=2), fl.preset_weights("random", 3, heads=1), 1e4
    q, k, v = x @ w.Q[0].T, x @ w.K[0].T, x @ w.V[0].T
    y = torch.softmax(beta * q @ k.transpose(-1, -2), -1) @ v  # torch.softmax subtracts the max: stable
    reference = y - (y * x).sum(-1, keepdim=True) * x
    got = fl.velocity(x.to(dtype), w.to(x.to(dtype)), beta)
    assert torch.isfinite(got).all()
    assert torch.allclose(got.double(), reference, atol=1e-12 if dtype == F64 else 1e-5)


# ----------------------------------------------------------------------------- large scores in expressive attention
def test_expressive_weights_at_huge_scores_are_finite_and_correct():
    s32 = torch.tensor([[1e20, 1.0, -3e19, 0.0], [2.0, -1e25, 0.5, 3.0]], dtype=torch.float32)
    reference = ea.expressive_weights(s32.double())  # s² ≤ 1e50 is finite in float64
    got = ea.expressive_weights(s32)
    assert torch.isfinite(got).all()
    assert torch.allclose(got.double(), reference, rtol=1e-6, atol=0)
    assert torch.allclose(got[0], torch.tensor([0.4, 0.2, 0.4, 0.0]))  # raw weights 1, ½, 1, 0
    s64 = torch.tensor([[1e200, 1.0, -1e300]], dtype=F64, requires_grad=True)  # s² overflows float64
    w = ea.expressive_weights(s64)
    assert torch.allclose(w, torch.tensor([[0.4, 0.2, 0.4]], dtype=F64), rtol=1e-15, atol=0)
    (grad,) = torch.autograd.grad(w[0, 1], s64)
    assert torch.isfinite(grad).all()


def test_expressive_energy_and_update_at_huge_scores_match_float64():
    z, tokens = torch.tensor([[1e10, 1.0]]), torch.tensor([[1e10, 0.0], [0.0, 1.0]])  # s = (1e20, 1) in float32
    eye = torch.eye(2)
    for fn in (ea.expressive_free_energy, ea.expressive_free_energy_update, ea.expressive_potentials):
        got, ref = fn(z, tokens, eye, 1.0), fn(z.double(), tokens.double(), eye.double(), 1.0)
        assert torch.isfinite(got).all(), fn.__name__
        assert torch.allclose(got.double(), ref, rtol=1e-6, atol=1e-30), fn.__name__


# ----------------------------------------------------------------------------- fully masked rows
def test_fully_masked_row_gets_zero_weights_and_finite_gradients():
    s = _randn(2, 4, 4).requires_grad_(True)
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    mask[0] = False  # query 0 may attend to nothing
    a = fe.dot_product_weights(s, mask, beta=0.5)
    assert torch.equal(a[:, 0], torch.zeros(2, 4, dtype=F64))
    ref = torch.softmax((0.5 * s[:, 1:]).masked_fill(~mask[1:], float("-inf")), -1)
    assert torch.equal(a[:, 1:], ref)  # the other rows are exactly the plain masked softmax
    upstream = _randn(2, 4, 4, seed=9)
    (grad,) = torch.autograd.grad((a * upstream).sum(), s)
    (ref_grad,) = torch.autograd.grad((ref * upstream[:, 1:]).sum(), s)
    assert torch.isfinite(grad).all() and torch.equal(grad[:, 0], torch.zeros(2, 4, dtype=F64))
    assert torch.equal(grad[:, 1:], ref_grad[:, 1:])
    assert torch.equal(ea.expressive_weights(s.detach(), mask)[:, 0], torch.zeros(2, 4, dtype=F64))


# ----------------------------------------------------------------------------- local attention needs another token
def test_local_attention_needs_two_tokens():
    x, J = _unit(1, D), _randn(1, 1, D, D)
    for call in (lambda: lo.local_energies(x, x, J, 1.0), lambda: lo.local_attention_update(x, J, 1.0)):
        with pytest.raises(ValueError, match="^x must hold at least 2 tokens"):
            call()
    with pytest.raises(ValueError, match="^n_tokens must be an int >= 2"):
        at.BareSelfAttention(at.AttractorConfig(n_tokens=1))
    two = _unit(2, D)  # N = 2: each token sees exactly the other one, with weight 1
    J2 = _randn(2, 2, D, D)
    expected = torch.stack([J2[0, 1] @ two[1], J2[1, 0] @ two[0]])
    assert torch.allclose(lo.local_attention_update(two, J2, 1.0), expected, rtol=1e-14, atol=1e-15)


# ----------------------------------------------------------------------------- degenerate sizes
@pytest.mark.parametrize("kwargs, name", [({"n_tokens": 0}, "n_tokens"), ({"n_tokens": -1}, "n_tokens"),
                                          ({"dim": 0}, "dim"), ({"trials": 0}, "trials")])
def test_verify_refuses_empty_instances(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name} must be an int >= 1"):
        catalog.verify("softmax_free_energy", **kwargs)


def test_verify_sizes_per_form_and_types():
    with pytest.raises(ValueError, match="^n_tokens must be an int >= 2"):
        catalog.verify("local_self_attention", n_tokens=1)
    with pytest.raises(TypeError, match="^n_tokens must be an int"):
        catalog.verify("softmax_free_energy", n_tokens=2.5)
    with pytest.raises(TypeError, match="^trials must be an int"):
        catalog.verify("softmax_free_energy", trials=True)
    assert catalog.verify("local_self_attention", n_tokens=2) < 1e-10
    assert catalog.verify("softmax_free_energy", trials=np.int64(1), n_tokens=np.int64(3), dim=np.int64(2)) < 1e-10
    with pytest.raises(ValueError, match="^dim must be an int >= 1"):
        fe.sample_sphere_tokens(3, 0)
    with pytest.raises(ValueError, match="^dim must be an int >= 1"):
        descent.multihead_sphere_instance(3, 0, 1)


LAYERS = [lambda: M.MultiHeadAttention(4, 2), lambda: M.ExpressiveAttention(4, 2), lambda: M.MHA2nd1st(4, 2),
          lambda: M.BiSoftmaxAttention(4, 2), lambda: M.SigmoidAttention(4, 2), lambda: M.KernelLinearAttention(4, 2),
          lambda: M.ReLUEnergyFeedforward(4), lambda: M.SoftmaxEnergyFeedforward(4),
          lambda: M.GatedEnergyFeedforward(4)]


@pytest.mark.parametrize("make", LAYERS)
def test_layers_refuse_zero_tokens(make):
    with pytest.raises(ValueError, match=r"^x must hold at least 1 token, got shape \(2, 0, 4\)"):
        make()(torch.zeros(2, 0, 4))


@pytest.mark.parametrize("cls", [M.MultiHeadAttention, M.ExpressiveAttention, M.MHA2nd1st, M.BiSoftmaxAttention,
                                 M.SigmoidAttention, M.KernelLinearAttention])
@pytest.mark.parametrize("dim", [0, -4])
def test_attention_layers_refuse_non_positive_dim(cls, dim):
    with pytest.raises(ValueError, match=f"^dim must be an int >= 1, got {dim}"):
        cls(dim, 2 if dim else 1)


@pytest.mark.parametrize("cls", [M.ReLUEnergyFeedforward, M.SoftmaxEnergyFeedforward, M.GatedEnergyFeedforward])
def test_feedforward_layers_refuse_bad_sizes_and_eps(cls):
    for dim in (0, -3):
        with pytest.raises(ValueError, match="^dim must be"):
            cls(dim, hidden=8)
    with pytest.raises(ValueError, match="^eps must be a finite number >= 0"):
        cls(4, eps=-1.0)
    assert cls(4, hidden=np.int64(6)).hidden == 6


def test_negative_eps_is_refused():
    with pytest.raises(ValueError, match="^eps must be a finite number >= 0"):
        M.BiSoftmaxAttention(4, 2, eps=-1e-6)
    X = 0.1 * _randn(N, D)
    for call in (lambda: hs.rms_normalize(X, eps=-1.0),
                 lambda: hs.hyperset_attention_update(X, W_HEADS, 1.0, True, -1.0),
                 lambda: hs.hyperset_feedforward_update(X, _randn(D, 9), rms=True, eps=-1.0)):
        with pytest.raises(ValueError, match="^eps must be a finite number >= 0"):
            call()
    assert torch.equal(M.BiSoftmaxAttention(4, 2, eps=0)(torch.randn(1, 3, 4)).isfinite(), torch.ones(1, 3, 4) > 0)


# ----------------------------------------------------------------------------- number types
NUMBERS = [np.float64(0.5), np.float32(0.5), torch.tensor(0.5), torch.tensor([0.5]), torch.tensor(0.5, dtype=F64)]


@pytest.mark.parametrize("value", NUMBERS, ids=lambda v: f"{type(v).__name__}")
def test_numpy_scalars_and_one_element_tensors_are_accepted_as_floats(value):
    E, x0, w = _randn(3, N), sp.random_tokens(2, 5, 3, seed=1), fl.preset_weights("random", 3)
    cases = [
        lambda v: fe.boltzmann_weights(E, v),
        lambda v: hf.hopfield_update(Z, H, v),
        lambda v: fe.dot_product_weights(E, beta=v),
        lambda v: sp.sphere_step(_unit(N, D), _randn(N, D), v),
        lambda v: lo.local_attention_update(_unit(N, D), _randn(N, N, D, D), v),
        lambda v: hs.hyperset_attention_update(H, W_HEADS, v),
        lambda v: fl.velocity(x0, w, v, normalized=False),
        lambda v: fl.energy(x0, v, w),
        lambda v: fl.simulate(x0, w, fl.FlowConfig(beta=v, step=v, steps=2)).x,
        lambda v: descent.descend(lambda y: -y, lambda y: y.pow(2).sum(), torch.ones(3, dtype=F64), v, 2).states,
    ]
    for case in cases:
        assert torch.equal(case(value), case(0.5))
    torch.manual_seed(0)
    layer = M.BiSoftmaxAttention(4, 2, beta=value)
    assert isinstance(layer.beta, float) and layer.beta == 0.5
    assert M.ExpressiveAttention(4, 2, scale=value).scale == 0.5


def test_numpy_and_tensor_ints_are_accepted_where_ints_are():
    assert torch.equal(sp.random_tokens(np.int64(2), np.int64(4), torch.tensor(3)), sp.random_tokens(2, 4, 3))
    layer = M.MultiHeadAttention(np.int64(4), np.int64(2))
    assert layer.dim == 4 and type(layer.dim) is int and layer.heads == 2
    run = descent.descend(lambda y: -y, lambda y: y.pow(2).sum(), torch.ones(3, dtype=F64), 0.5, np.int64(3))
    assert run.states.shape[0] == 4
    traj = fl.simulate(sp.random_tokens(1, 3, 3), fl.preset_weights("identity", 3), fl.FlowConfig(steps=np.int64(3)))
    assert traj.x.shape[0] == 4


@pytest.mark.parametrize("value", [True, np.bool_(True), "0.5", None, [0.5], torch.tensor(True), 1j],
                         ids=lambda v: f"{type(v).__name__}")
def test_bools_and_non_numbers_are_refused_naming_the_argument(value):
    E, x0, w = _randn(3, N), sp.random_tokens(1, 3, 3), fl.preset_weights("identity", 3)
    cases = [("T", lambda v: fe.boltzmann_weights(E, v)),
             ("beta", lambda v: fe.dot_product_weights(E, beta=v)),
             ("eta", lambda v: sp.sphere_step(_unit(N, D), _randn(N, D), v)),
             ("beta", lambda v: fl.velocity(x0, w, v)),
             ("step", lambda v: fl.simulate(x0, w, fl.FlowConfig(step=v, steps=1))),
             ("eps", lambda v: M.ReLUEnergyFeedforward(4, eps=v))]
    if value is not None:  # None is the documented default of these two
        cases += [("scale", lambda v: M.ExpressiveAttention(4, 2, scale=v)),
                  ("beta", lambda v: M.BiSoftmaxAttention(4, 2, beta=v))]
    for name, case in cases:
        with pytest.raises(TypeError, match=f"^{name} must be a real number"):
            case(value)


def test_scalar_arguments_refuse_tensors_of_several_values():
    with pytest.raises(TypeError, match="^beta must be a real number"):
        fl.velocity(sp.random_tokens(1, 3, 3), fl.preset_weights("identity", 3), torch.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="^eps must be a real number"):
        hs.rms_normalize(_randn(3, 4), torch.tensor([0.0, 1.0]))
    # where a per-entry tensor makes sense (a temperature per query) it is still accepted and checked entry-wise
    T = torch.tensor([[0.5], [1.0], [2.0]], dtype=F64)
    assert torch.allclose(fe.boltzmann_weights(_randn(3, N), T), torch.softmax(-_randn(3, N) / T, -1), rtol=1e-15)
    with pytest.raises(ValueError, match="^T must be finite and > 0 everywhere"):
        fe.boltzmann_weights(_randn(3, N), -T)
