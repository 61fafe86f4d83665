"""Bad input to the modern Hopfield energy (issue 13): an empty set of patterns."""
import pytest

from energylab.forms import hopfield as hf
from tests.probes import NO_KEYS, Z


@pytest.mark.parametrize("call, name", [
    (lambda: hf.hopfield_energy(Z, NO_KEYS, 1.0), "X"),
    (lambda: hf.hopfield_update(Z, NO_KEYS, 1.0), "X"),
])
def test_empty_token_sets_raise_naming_the_tokens(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must hold at least 1"):
        call()
