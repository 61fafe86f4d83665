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
