"""Every claim chapter 8 (section 8.7) makes about the committed medium run, read from results/hyperset/medium.json."""
import pytest

from energylab.committed import load_committed
from energylab.experiments import hyperset


@pytest.fixture(scope="module")
def medium():
    return load_committed("hyperset", "medium")


def _acc(results, layer, t):
    return results.final[f"{layer}@T{t}"]


def test_the_file_is_the_medium_profile(medium):
    results, provenance = medium
    cfg = hyperset.PROFILES["medium"]
    assert tuple(results.config["layers"]) == cfg.layers and len(cfg.layers) == 11
    assert (results.config["dim"], results.config["iterations"], results.config["epochs"]) == (64, 8, 25)
    assert results.extra["steps"] == 500 and not provenance["dirty"] and provenance["seconds"] < 20 * 60


def test_hyperset_has_half_the_parameters_and_is_within_two_points(medium):
    results = medium[0]
    n = results.extra["parameters"]
    assert (n["hyperset"], n["transformer"]) == (26944, 51392) and n["hyperset"] / n["transformer"] < 0.55
    assert _acc(results, "hyperset", 8) == pytest.approx(0.964)
    assert _acc(results, "transformer", 8) == pytest.approx(0.98)


def test_the_swaps_at_the_trained_depth(medium):
    results = medium[0]
    at_t = {layer: _acc(results, layer, 8) for layer in results.config["layers"]}
    assert min(at_t.values()) == pytest.approx(0.904) and at_t["hyperset-softmaxff"] == pytest.approx(0.904)
    assert max(at_t.values()) == pytest.approx(0.98) and at_t["hyperset-sigmoid"] == pytest.approx(0.98)
    best_lora = max(at_t[f"hyperset-lora{r}"] for r in (2, 4, 8))
    assert best_lora == pytest.approx(0.956) and best_lora < at_t["hyperset"]
    assert min(at_t[f"hyperset-lora{r}"] for r in (2, 4, 8)) == pytest.approx(0.946)


def test_fixed_steps_and_linear_attention_fail_past_the_trained_depth(medium):
    results = medium[0]
    assert _acc(results, "hyperset-fixed0.1", 16) == pytest.approx(0.328)
    assert _acc(results, "hyperset-fixed0.5", 16) == pytest.approx(0.47)
    assert _acc(results, "hyperset-linear", 16) == pytest.approx(0.462)
    assert _acc(results, "hyperset", 16) == pytest.approx(0.936)


def test_the_medium_dynamics_are_not_the_papers(medium):
    m = medium[0].extra["metrics"]["hyperset"]
    assert len(m["attention"]) == 17  # t = 0 .. 2T
    assert all(b > a for a, b in zip(m["attention"], m["attention"][1:]))
    ff = m["feedforward"]
    assert ff[1] > ff[0] and all(b < a for a, b in zip(ff[1:], ff[2:]))
    for key in ("effective_rank", "average_angle"):
        assert all(b < a for a, b in zip(m[key], m[key][1:]))
