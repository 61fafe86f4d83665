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


_EIG_SCRIPT = r"""
import torch
from energylab import jacobians as J
x = torch.tensor([0.0, 1.0], dtype=torch.float64)  # sqrt is finite at 0, its derivative is not
for name, call in (("eigenvalues", lambda: J.jacobian_eigenvalues(lambda v: v.abs().sqrt(), x)),
                   ("contribution", lambda: J.contribution_index(lambda v: v.abs().sqrt(), x))):
    try:
        call()
        print(name, "returned")
    except ValueError as err:
        print(name, err)
"""


def test_a_non_finite_jacobian_is_named_before_lapack():
    """A step whose output is finite but whose Jacobian is not reached LAPACK's eigensolvers, which crash the
    process on NaN (through MKL) and hang on inf: run in a child process, which must end with a message."""
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", _EIG_SCRIPT], cwd=root, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        "eigenvalues the Jacobian of step at x has NaN or infinite entries, so it has no eigenvalues to compute; "
        "every entry must be finite",
        "contribution the Jacobian of drive at X has NaN or infinite entries, so it has no eigenvalues to compute; "
        "every entry must be finite"]
