"""Bad input to the sphere flows (issue 35): a config given as a dict."""
import pytest

from energylab import flows as fl
from energylab import sphere as sp


def test_simulate_given_a_dict_config_says_to_build_a_flow_config():
    x0, w = sp.random_tokens(1, 4, 3, seed=0), fl.preset_weights("identity", 3)
    with pytest.raises(TypeError, match=r"^config must be a FlowConfig, got dict \(build one with "
                                        r"FlowConfig\(\*\*settings\)\)"):
        fl.simulate(x0, w, {"beta": 1.0, "steps": 3})
    traj = fl.simulate(x0, w, fl.FlowConfig(**{"beta": 1.0, "steps": 3}))
    assert traj.x.shape == (4, 1, 4, 3)
