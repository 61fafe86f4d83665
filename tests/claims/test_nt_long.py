"""Chapter 5, section 5.8: every claim about results/nt/long-n16t2.json and results/nt/n16t2-causes.json, through
the functions the chapter calls, and the numbers its prose quotes."""
import pytest

from energylab.claims import nt as nt_claims
from energylab.engine.committed import load_committed
from energylab.experiments import nt


@pytest.fixture(scope="module")
def long():
    return load_committed("nt", "long-n16t2")


@pytest.fixture(scope="module")
def causes():
    return load_committed("nt", "n16t2-causes")


@pytest.mark.parametrize("name", ["long-n16t2", "n16t2-causes"])
def test_the_files_are_their_profiles_from_a_clean_pinned_tree(name):
    results, provenance = load_committed("nt", name)
    assert [r["name"] for r in results.config["runs"]] == [r.name for r in nt.PROFILES[name].runs]
    assert provenance["dirty"] is False and provenance["numerics"] == "pinned"
    assert all(row["seeds"] == 8 for row in results.tables["final"])


def test_the_long_claims_hold(long):
    claims = nt_claims.long_claims(long[0])
    assert len(claims) == 4 and all(claims.values()), claims


def test_the_causes_claims_hold(causes):
    claims = nt_claims.causes_claims(causes[0])
    assert len(claims) == 5 and all(claims.values()), claims


def test_the_numbers_section_5_8_quotes(long, causes):
    rows = nt_claims.finals(long[0])
    assert (round(rows["N16T2-32/DPA"]["acc_mean"], 3), round(rows["N16T2-32/EA"]["acc_mean"], 3)) == (0.911, 0.834)
    rows = nt_claims.finals(causes[0])
    assert round(rows["N16T2-16+sum+noclip/DPA"]["acc_mean"], 3) == 0.976
    assert nt_claims.first_epoch(causes[0], "N16T2-16+sum+noclip", "EA", 0.99) == 1200
    assert [round(rows[f"N16T2-16+sum+affine/{m}"]["acc_mean"], 2) for m in ("DPA", "EA")] == [0.68, 0.74]
    assert [round(rows[f"N16T2-32+sum/{m}"]["acc_mean"], 2) for m in ("DPA", "EA")] == [0.83, 0.78]
    assert max(rows[f"N16T2-16+sum/{m}"]["acc_max"] for m in ("DPA", "EA")) < 0.70  # "neither gets past 0.70"


@pytest.fixture(scope="module")
def figures():
    return load_committed("nt", "figures")


def test_the_figures_claims_hold(figures):
    results, provenance = figures
    assert provenance["dirty"] is False and provenance["numerics"] == "pinned"
    assert all(dict(r["overrides"])["loss_sum"] is True and dict(r["overrides"])["grad_clip"] == 10.0
               for r in results.config["runs"])
    claims = nt_claims.figures_claims(results)
    assert len(claims) == 6 and all(claims.values()), claims


def test_the_numbers_section_5_9_quotes(figures):
    results = figures[0]
    rows = nt_claims.finals(results)
    assert (round(results.final["N16T2-52/EA/acc_mean"], 4), round(results.final["N16T2-52/DPA/acc_mean"], 4)) == (
        0.9985, 0.9926)
    assert (rows["N16T2-52/EA"]["solved"], rows["N16T2-32/EA"]["solved"], rows["N16T2-32/DPA"]["solved"]) == (3, 8, 1)
    assert [nt_claims.first_epoch(results, "N16T2-32", m, 0.99) for m in ("DPA", "EA")] == [1200, 1400]
    assert [round(rows[f"N16T5-64/{m}"]["acc_mean"], 3) for m in ("DPA", "EA")] == [0.156, 0.127]
    halves = [round(results.final[f"N16T2+T2S-32/{m}/acc_{v}_mean"], 3) for m in ("DPA", "EA") for v in ("NT", "NT-S")]
    assert halves == [0.970, 0.996, 0.946, 1.000]
    assert [round(rows[f"N16T2R-64/{m}"]["acc_mean"], 3) for m in ("DPA", "EA")] == [0.991, 0.960]
    assert min(nt_claims.seed_mean(results, "N16T2-32", m)[300] for m in ("DPA", "EA")) > 0.6  # ex-ens


def test_every_run_beats_the_input_blind_predictor(long, causes, figures):
    for results, _ in (long, causes, figures):
        for row in results.tables["final"]:
            assert row["constant"] < 0.07 and row["acc_min"] > row["constant"] + 0.05, row  # N16T5: the closest


def test_a_claim_can_fail():
    """Lower every EA seed of the unclipped run below DPA: the chapter's "EA solves it, DPA does not" turns false."""
    results, _ = load_committed("nt", "n16t2-causes")
    for label, history in results.histories.items():
        if label.startswith("N16T2-16+sum+noclip/EA/"):
            history.curves["eval/acc"] = [v - 0.1 for v in history.curves["eval/acc"]]
    assert nt_claims.compare(results, "N16T2-16+sum+noclip") == "behind"
    assert not all(nt_claims.causes_claims(results).values())


def test_the_clip_guard_claims_hold(causes):
    """The clip-10 guard of the figures run, measured on N16T2-16 (results/nt/clip-guard.json): the file is its
    profile from a clean pinned tree, the twin of n16t2-causes' unclipped run, and the chapter's claims hold."""
    guard, provenance = load_committed("nt", "clip-guard")
    assert [r["name"] for r in guard.config["runs"]] == [r.name for r in nt.PROFILES["clip-guard"].runs]
    assert provenance["dirty"] is False and provenance["numerics"] == "pinned"
    assert dict(guard.config["runs"][0]["overrides"])["grad_clip"] == nt.GUARD_CLIP
    effect = nt_claims.guard_effect(causes[0], "N16T2-16+sum+noclip", guard, "N16T2-16+sum+clip10")
    assert effect["DPA"]["change"][0] == effect["EA"]["change"][0] == 0  # same initial models and held-out data
    claims = nt_claims.guard_claims(causes[0], guard)
    assert len(claims) == 4 and all(claims.values()), claims
