"""Every claim chapter 5 makes about its committed medium runs: section 5.6 (results/nt/medium.json) and section 5.7
(results/nt/medium-n16t2.json)."""
import pytest
import torch

from energylab.engine.committed import load_committed
from energylab.experiments import nt


@pytest.fixture(scope="module")
def medium():
    results, provenance = load_committed("nt", "medium")
    return results, provenance


def _final(results):
    return {f"{row['task']}/{row['attention']}": row for row in results.tables["final"]}


def _first_epoch(results, task, attention, level=0.99):
    hs = [h for label, h in results.histories.items() if label.startswith(f"{task}/{attention}/")]
    mean = torch.tensor([h.curves["eval/acc"] for h in hs]).mean(0).tolist()
    return next((s for s, m in zip(hs[0].steps["eval/acc"], mean) if m >= level), None)


def test_the_file_is_the_medium_profile(medium):
    results, provenance = medium
    assert [r["name"] for r in results.config["runs"]] == [r.name for r in nt.PROFILES["medium"].runs]
    assert results.config["n_final_series"] == 500 and provenance["seconds"] < 20 * 60
    rows = _final(results)
    assert (rows["N2T5-16/DPA"]["seeds"], rows["N2T5-16/DPA"]["epochs"]) == (16, 2000)  # the paper's protocol
    assert all(rows[f"N2T5-16+{v}/EA"]["seeds"] == 8 and rows[f"N2T5-16+{v}/EA"]["epochs"] == 1000
               for v in ("affine", "sum", "noclip"))
    assert rows["N2T5-16+affine/EA"]["affine"] and rows["N2T5-16+sum/EA"]["loss_sum"]
    assert rows["N2T5-16+noclip/EA"]["grad_clip"] is None


def test_the_reversal_persists_at_the_papers_protocol(medium):
    rows = _final(medium[0])
    assert rows["N2T5-16/DPA"]["solved"] == 16 and rows["N2T5-16/EA"]["solved"] == 2
    assert rows["N2T5-16/EA"]["acc_mean"] == pytest.approx(0.685, abs=5e-4)
    assert _first_epoch(medium[0], "N2T5-16", "DPA") == 700 and _first_epoch(medium[0], "N2T5-16", "EA") is None


def test_ea_is_positional_without_layernorm_affine_and_the_affine_fixes_it(medium):
    rows = _final(medium[0])
    for task in ("N2T5-16", "N2T5-16+sum", "N2T5-16+noclip"):
        assert rows[f"{task}/EA"]["weight_std"] < 1e-4 and rows[f"{task}/DPA"]["weight_std"] > 0.1
    assert rows["N2T5-16+affine/EA"]["solved"] == 8 and rows["N2T5-16+affine/EA"]["weight_std"] == pytest.approx(
        0.30, abs=0.01)
    assert rows["N2T5-16+sum/EA"]["acc_mean"] == pytest.approx(0.698, abs=5e-4)
    assert rows["N2T5-16+noclip/EA"]["acc_mean"] == pytest.approx(0.689, abs=5e-4)
    assert rows["N2T5-16+sum/EA"]["solved"] == rows["N2T5-16+noclip/EA"]["solved"] == 2


def test_with_the_affine_ea_is_not_faster_than_dpa(medium):
    results = medium[0]
    assert _first_epoch(results, "N2T5-16+affine", "DPA") == 800
    assert _first_epoch(results, "N2T5-16+affine", "EA") == 800
    hs = [h for label, h in results.histories.items() if label.startswith("N2T5-16+affine/DPA/")]
    mean = torch.tensor([h.curves["eval/acc"] for h in hs]).mean(0).tolist()
    steps = hs[0].steps["eval/acc"]
    assert round(mean[steps.index(200)], 2) == 0.88 and round(mean[steps.index(400)], 2) == 0.97  # no stall at 0.5


def test_attention_ranges_agree_with_the_papers_figure_4(medium):
    ranges = {}
    for a in ("DPA", "EA"):
        row = torch.tensor(medium[0].extra["attention"][f"N2T5-16/{a}"])[-1].clamp_min(1e-12).log10()
        ranges[a] = float(row.max() - row.min())
    assert ranges["EA"] == pytest.approx(1.45, abs=0.01) and ranges["DPA"] == pytest.approx(1.03, abs=0.01)


@pytest.fixture(scope="module")
def n16t2():
    return load_committed("nt", "medium-n16t2")


def _mean_at(results, task, attention):
    hs = [h for label, h in results.histories.items() if label.startswith(f"{task}/{attention}/")]
    return dict(zip(hs[0].steps["eval/acc"], torch.tensor([h.curves["eval/acc"] for h in hs]).mean(0).tolist()))


def test_the_n16t2_file_is_its_profile(n16t2):
    results, provenance = n16t2
    assert [r["name"] for r in results.config["runs"]] == ["N16T2-16", "N16T2-32", "N16T2-56"]
    rows = _final(results)
    assert [(rows[f"{t}/EA"]["seeds"], rows[f"{t}/EA"]["epochs"]) for t in ("N16T2-16", "N16T2-32", "N16T2-56")] == [
        (8, 2000), (8, 1000), (8, 300)]
    assert not provenance["dirty"] and provenance["seconds"] < 20 * 60


def test_n16t2_56_both_solve_it_in_about_200_epochs(n16t2):
    results = n16t2[0]
    rows = _final(results)
    assert rows["N16T2-56/DPA"]["acc_mean"] == pytest.approx(0.9994, abs=5e-5) and rows["N16T2-56/EA"]["acc_mean"] == 1
    assert (rows["N16T2-56/DPA"]["solved"], rows["N16T2-56/EA"]["solved"]) == (6, 8)
    dpa, ea = _mean_at(results, "N16T2-56", "DPA"), _mean_at(results, "N16T2-56", "EA")
    assert (round(dpa[100], 3), round(ea[100], 3)) == (0.856, 0.955)
    assert (round(dpa[200], 3), round(ea[200], 3)) == (0.992, 0.999)


def test_n16t2_32_has_no_plateau_and_dpa_leads(n16t2):
    results = n16t2[0]
    rows = _final(results)
    assert round(rows["N16T2-32/DPA"]["acc_mean"], 3) == 0.649 and round(rows["N16T2-32/EA"]["acc_mean"], 3) == 0.61
    assert round(rows["N16T2-32/DPA"]["acc_min"], 3) == 0.624 and round(rows["N16T2-32/EA"]["acc_max"], 3) == 0.624
    dpa, ea = _mean_at(results, "N16T2-32", "DPA"), _mean_at(results, "N16T2-32", "EA")
    assert (round(dpa[500], 3), round(ea[500], 3)) == (0.548, 0.535)
    assert dpa[1000] - dpa[500] >= 0.05 and ea[1000] - ea[500] >= 0.05


def test_n16t2_16_is_solved_by_neither(n16t2):
    rows = _final(n16t2[0])
    assert rows["N16T2-16/DPA"]["solved"] == rows["N16T2-16/EA"]["solved"] == 0
    assert round(rows["N16T2-16/DPA"]["acc_mean"], 3) == 0.508 and round(rows["N16T2-16/EA"]["acc_mean"], 3) == 0.464
    assert rows["N16T2-16/EA"]["acc_max"] < 0.5
