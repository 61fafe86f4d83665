"""Algorithm 1 as an experiment (chapter 2): its runs at three rates on W, saved and resumed."""
import math

import pytest

from energylab.experiments import alternating, get_config, run_experiment


def test_quick_profile_reproduces_the_chapters_three_regimes():
    """On the experiment's own seeded draw, the chapter's three regimes: the small rate trains (test accuracy >= 0.95,
    cross-entropy down by more than 3x), the rate 0.5 collapses W (F* at its floor −T log N, W's norm ~ 0, chance
    cross-entropy log C), Algorithm 1's own rate 1 keeps W but does not train (final test accuracy < 0.95)."""
    res = alternating.run(get_config("alternating", "quick"))
    assert set(res.histories) == {"lr_W=0.05", "lr_W=0.5", "lr_W=1"}
    slow, collapse, own = (res.histories[k] for k in ("lr_W=0.05", "lr_W=0.5", "lr_W=1"))
    assert slow.last("test_accuracy") >= 0.95
    assert slow.last("cross_entropy") < slow.curves["cross_entropy"][0] / 3
    assert abs(collapse.last("free_energy") - res.extra["floor"]) < 1e-3 and collapse.last("W_norm") < 1e-6
    assert abs(collapse.last("cross_entropy") - math.log(4)) < 1e-3
    assert own.last("W_norm") > 0.1 and own.last("test_accuracy") < 0.95
    assert slow.steps["test_accuracy"] == list(range(1, 61)) and res.final["lr_W=0.05/test_accuracy"] == \
        slow.last("test_accuracy")


def test_saved_run_resumes_from_its_finished_rates(tmp_path):
    out = str(tmp_path / "run")
    first = run_experiment("alternating", "quick", out_dir=out, epochs=5, rates_W=(0.05, 1.0))
    again = run_experiment("alternating", "quick", out_dir=out, resume=True, epochs=5, rates_W=(0.05, 1.0))
    assert again.final == first.final and (tmp_path / "run" / "lr_W=1" / "checkpoint.pt").exists()
    with pytest.raises(ValueError, match="already holds a run"):
        run_experiment("alternating", "quick", out_dir=out, epochs=5, rates_W=(0.05, 1.0))
    with pytest.raises(ValueError, match="rates_W"):
        alternating.run(get_config("alternating", "quick", rates_W=()))
