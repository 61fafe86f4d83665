"""Bad input to energylab.jacobians (issue 35): 16-bit states, steps that return NaN or diverge."""
import pytest
import torch

from energylab import jacobians as J

F64 = torch.float64
X = torch.randn(3, 4, dtype=F64, generator=torch.Generator().manual_seed(0))


def contraction(x):
    return 0.5 * torch.tanh(x)


def test_jacobian_tools_refuse_16_bit_states():
    for call in (lambda x: J.step_jacobian(contraction, x), lambda x: J.jacobian_eigenvalues(contraction, x),
                 lambda x: J.lyapunov_spectrum(contraction, x, steps=3)):
        with pytest.raises(TypeError, match=r"must have dtype float32, float64, got torch.float16 \(Jacobians"):
            call(X.half())


def test_a_step_that_returns_nan_is_named():
    with pytest.raises(ValueError, match=r"^step\(x\) contains NaN or inf"):
        J.step_jacobian(lambda x: x * float("nan"), X)
    with pytest.raises(ValueError, match=r"^step\(x0\) contains NaN or inf"):
        J.lyapunov_spectrum(lambda x: torch.log(x), -X.abs(), steps=3)


def test_a_diverging_lyapunov_run_is_named_instead_of_nan_exponents():
    with pytest.raises(ValueError, match=r"^the state is NaN or inf after \d+ steps of step: the map diverges"):
        J.lyapunov_spectrum(lambda x: 1e100 * x, X, steps=10)


def test_a_contraction_has_finite_negative_exponents():
    exponents = J.lyapunov_spectrum(contraction, X, steps=20)
    assert torch.isfinite(exponents).all() and float(exponents.max()) < 0
