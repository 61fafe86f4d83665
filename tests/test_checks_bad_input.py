"""Bad input to the library (issue 13, item 5): the number types accepted where a float (or an int) is expected,
and the ones refused naming the argument, through the checks of energylab._checks that every module calls.

The other probes of issue 13 (empty token sets, all-zero inputs, large inverse temperatures, large scores, fully
masked rows, too few tokens, degenerate sizes) stand beside the tests of the module they probe:
tests/forms/<family>/test_<family>_bad_input.py, tests/forms/test_catalog_bad_input.py,
tests/layers/test_modules_bad_input.py and tests/test_flows_bad_input.py.
"""
import numpy as np
import pytest
import torch

from energylab import descent
from energylab import flows as fl
from energylab import layers as M
from energylab import sphere as sp
from energylab.forms import free_energy as fe
from energylab.forms import hopfield as hf
from energylab.forms import hyperspherical as hs
from energylab.forms import local as lo
from tests.probes import F64, W_HEADS, D, H, N, Z, randn, unit

# ----------------------------------------------------------------------------- number types
NUMBERS = [np.float64(0.5), np.float32(0.5), torch.tensor(0.5), torch.tensor([0.5]), torch.tensor(0.5, dtype=F64)]


@pytest.mark.parametrize("value", NUMBERS, ids=lambda v: f"{type(v).__name__}")
def test_numpy_scalars_and_one_element_tensors_are_accepted_as_floats(value):
    E, x0, w = randn(3, N), sp.random_tokens(2, 5, 3, seed=1), fl.preset_weights("random", 3)
    cases = [
        lambda v: fe.boltzmann_weights(E, v),
        lambda v: hf.hopfield_update(Z, H, v),
        lambda v: fe.dot_product_weights(E, beta=v),
        lambda v: sp.sphere_step(unit(N, D), randn(N, D), v),
        lambda v: lo.local_attention_update(unit(N, D), randn(N, N, D, D), v),
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
    E, x0, w = randn(3, N), sp.random_tokens(1, 3, 3), fl.preset_weights("identity", 3)
    cases = [("T", lambda v: fe.boltzmann_weights(E, v)),
             ("beta", lambda v: fe.dot_product_weights(E, beta=v)),
             ("eta", lambda v: sp.sphere_step(unit(N, D), randn(N, D), v)),
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
        hs.rms_normalize(randn(3, 4), torch.tensor([0.0, 1.0]))
    # where a per-entry tensor makes sense (a temperature per query) it is still accepted and checked entry-wise
    T = torch.tensor([[0.5], [1.0], [2.0]], dtype=F64)
    assert torch.allclose(fe.boltzmann_weights(randn(3, N), T), torch.softmax(-randn(3, N) / T, -1), rtol=1e-15)
    with pytest.raises(ValueError, match="^T must be finite and > 0 everywhere"):
        fe.boltzmann_weights(randn(3, N), -T)
