"""Shared fixtures for the library tests."""
import pytest
import torch


@pytest.fixture
def float64_default():
    """Make float64 the default dtype for one test (identities are checked in float64), then restore it.

    Test modules opt in with ``pytestmark = pytest.mark.usefixtures("float64_default")``; never set the
    default dtype at import time, which would silently change every other test module in the session.
    """
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


@pytest.fixture(autouse=True)
def torch_process_state():
    """Every test starts from the same process-wide torch settings and leaves them so: a test that calls
    ``energylab.setup_notebook`` (one thread, oneDNN off in pinned runs, as a chapter's kernel wants) or sets the
    default dtype must not change the tests after it. (Seen: with oneDNN off, the compiled ensemble's backward is
    not reentrant, and tests/layers/test_fast_paths.py's gradcheck failed only when run after such a test.)"""
    saved = (torch.get_num_threads(), torch.get_float32_matmul_precision(), torch.backends.mkldnn.enabled,
             torch.get_default_dtype())
    yield
    torch.set_num_threads(saved[0])
    torch.set_float32_matmul_precision(saved[1])
    torch.backends.mkldnn.enabled = saved[2]
    torch.set_default_dtype(saved[3])
