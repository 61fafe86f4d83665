"""Bad input to energylab.derive (issue 35): energies that are not scalars, are NaN, are not differentiable or
raise; empty batches; 16-bit inputs. (The Jacobian tools': tests/test_jacobians_bad_input.py.)"""
import pytest
import torch

from energylab.layers import energy as D

F64 = torch.float64
X = torch.randn(3, 4, dtype=F64, generator=torch.Generator().manual_seed(0))


def quad(x):
    return 0.5 * (x ** 2).sum()


@pytest.mark.parametrize("kind", ["gradient", "newton"])
@pytest.mark.parametrize("energy, error, expected", [
    (lambda x: x ** 2, ValueError, r"must return a scalar or one value per batch element, shape \(\) or \(3,\)"),
    (lambda x: quad(x) * float("nan"), ValueError, r"^the energy is NaN or inf"),
    (lambda x: torch.tensor(1.0, dtype=F64), TypeError, r"^the energy is not differentiable in x"),
    (lambda x: (x.detach() ** 2).sum(), TypeError, r"^the energy is not differentiable in x"),
    (lambda x: 1.0, TypeError, r"^the energy must return a torch.Tensor, got float"),
])
def test_bad_energies_are_named(kind, energy, error, expected):
    with pytest.raises(error, match=expected):
        D.derive(energy, kind)(X)


@pytest.mark.parametrize("kind", ["gradient", "newton"])
def test_an_error_inside_the_energy_keeps_its_type_and_says_where(kind):
    def broken(x):
        raise KeyError("W")

    with pytest.raises(KeyError) as info:
        D.derive(broken, kind)(X)
    assert any("raised inside the energy of this EnergyLayer, called on x of shape (3, 4)" in n
               for n in info.value.__notes__)


@pytest.mark.parametrize("kind", ["gradient", "newton"])
@pytest.mark.parametrize("shape", [(0, 4), (0, 3, 4)])
def test_an_empty_batch_gives_an_empty_update(kind, shape):
    x = torch.zeros(shape, dtype=F64)
    assert D.derive(quad, kind).update(x).shape == shape


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kind", ["gradient", "newton"])
def test_16_bit_inputs_give_a_finite_update_close_to_float64(kind, dtype):
    """E = ½ xᵀ A x with A = diag(1, 2, 3, 4) per row: gradient −Ax, Newton −(A + λI)⁻¹Ax ≈ −x."""
    a = torch.arange(1.0, 5.0, dtype=F64)
    layer = D.derive(lambda x: 0.5 * (a.to(x.dtype) * x ** 2).sum(), kind, damping=0.0)
    u = layer.update(X.to(dtype))
    assert u.dtype == dtype and torch.isfinite(u).all()
    exact = -a * X if kind == "gradient" else -X
    assert float((u.double() - exact).norm() / exact.norm()) < 2e-2


def test_derive_refuses_bad_arguments():
    with pytest.raises(TypeError, match="^energy must be callable, got str"):
        D.derive("x**2")
    with pytest.raises(ValueError, match="^kind must be one of"):
        D.derive(quad, "hessian")
    with pytest.raises(TypeError, match="^step must be a real number, got True"):
        D.derive(quad, step=True)
    with pytest.raises(TypeError, match="^x must be a floating-point torch.Tensor"):
        D.derive(quad)(torch.ones(3, 4, dtype=torch.long))
