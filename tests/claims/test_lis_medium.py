"""Every claim chapter 4 (section 4.7) makes about the committed medium run, read from results/lis/medium.json."""
import math

import pytest
from scipy import stats

from energylab.engine.committed import load_committed
from energylab.experiments import lis
from energylab.tasks import lis as task

VARIANTS = ("MHA-only", "MHA2nd1st-only", "MHA2nd1stC-only")


@pytest.fixture(scope="module")
def medium():
    return load_committed("lis", "medium")


@pytest.fixture(scope="module")
def rows(medium):
    return {row["variant"]: row for row in medium[0].tables["grid"]}


def _finals(results, variant, metric):
    hs = [h for label, h in results.histories.items() if label.startswith(f"L6/d32/{variant}/")]
    return [lis.final_accuracy(h, results.config["last_k"], f"eval/{metric}") for h in hs]


def test_the_file_is_the_medium_profile(medium):
    results, provenance = medium
    profile = lis.PROFILES["medium"]
    c = results.config
    assert tuple(c["variants"]) == profile.variants == VARIANTS
    assert (tuple(c["lengths"]), tuple(c["dims"]), tuple(c["answers"])) == ((6,), (32,), (2, 5))
    assert (c["n_train"], c["n_test"], c["batch_size"], c["lr"]) == (12_800, 1024, 64, 3e-3)
    assert (c["warmup_steps"], c["schedule"], tuple(c["seeds"])) == (200, "cosine", (0, 1, 2))
    assert c["epochs"] * results.extra["steps_per_epoch"]["6"] == 2000  # "2,000 steps"
    assert not provenance["dirty"] and provenance["machine"]["torch_threads"] == 1
    assert provenance["seconds"] == pytest.approx(671.0, abs=0.1)  # "11.2 min" in the caption, under 20 min
    assert round(provenance["seconds"] / 60, 1) == 11.2


def test_the_sorted_share_formula_and_the_input_free_scores(medium):
    # eq. (eq-nw-sorted-share): 0.3438 at L = 4, the plateau of the quick run
    share = sum(math.factorial(k) for k in range(1, 5)) / math.factorial(4) / 4
    assert round(share, 4) == 0.3438
    base = medium[0].extra["baselines"]["6"]
    assert round(base["answer"], 3) == 0.271 and round(base["trace"], 3) == 0.052
    # the committed baselines are those of the test set the profile draws
    data = task.make_data(6, 12_800, 1024, 250, seed=0, answers=(2, 5))
    assert lis.trivial_baselines(data.test, 6) == base


def test_every_variant_learns_beyond_the_input_free_scores(rows, medium):
    base = medium[0].extra["baselines"]["6"]
    answer = {v: round(rows[v]["answer"], 3) for v in VARIANTS}
    exact = {v: round(rows[v]["accuracy"], 3) for v in VARIANTS}
    assert answer == {"MHA-only": 0.478, "MHA2nd1st-only": 0.508, "MHA2nd1stC-only": 0.519}
    assert exact == {"MHA-only": 0.126, "MHA2nd1st-only": 0.142, "MHA2nd1stC-only": 0.158}
    ratios = [rows[v]["accuracy"] / base["trace"] for v in VARIANTS]
    assert round(min(ratios), 1) == 2.4 and round(max(ratios), 1) == 3.0  # "2.4-3.0 times"
    for v in VARIANTS:
        assert abs(rows[v]["trace"] - rows[v]["accuracy"]) <= 0.001  # trace = exact match to within 0.001
        assert rows[v]["trace"] < 1 / 6 + 0.01  # "about six in seven traces are still wrong" (or more)


def test_the_ranking_is_the_papers_but_the_gaps_are_not_resolved(rows, medium):
    a, b, c = (rows[v] for v in VARIANTS)
    gaps = {k: round(b[k] - a[k], 3) for k in ("accuracy", "answer", "auc", "answer_auc")}
    assert gaps == {"accuracy": 0.017, "answer": 0.030, "auc": 0.011, "answer_auc": 0.024}
    for k in ("accuracy", "answer", "auc", "answer_auc"):
        assert a[k] < b[k] < c[k]  # MHA-only < MHA2nd1st-only < the corrected layer, on all four measures
    results = medium[0]
    spans = {v: [round(x, 3) for x in (min(_finals(results, v, "exact")), max(_finals(results, v, "exact")))]
             for v in ("MHA-only", "MHA2nd1stC-only")}
    assert spans == {"MHA-only": [0.098, 0.176], "MHA2nd1stC-only": [0.080, 0.252]}
    exact = stats.ttest_ind(_finals(results, "MHA2nd1st-only", "exact"), _finals(results, "MHA-only", "exact"))
    answer = stats.ttest_ind(_finals(results, "MHA2nd1st-only", "answer_greedy"),
                             _finals(results, "MHA-only", "answer_greedy"))
    assert round(exact.pvalue, 2) == 0.57
    assert round(answer.statistic, 2) == 2.57 and round(answer.pvalue, 2) == 0.06
    # the table's means are the means of these per-seed finals
    assert sum(_finals(results, "MHA-only", "answer_greedy")) / 3 == pytest.approx(a["answer"])


def test_mha2nd1st_has_a_quarter_fewer_attention_parameters(rows):
    assert rows["MHA2nd1st-only"]["attention_params_per_layer"] == 3 * 32 ** 2 + 2 * 4
    assert rows["MHA-only"]["attention_params_per_layer"] == 4 * 32 ** 2
