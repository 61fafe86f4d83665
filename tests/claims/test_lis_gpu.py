"""Chapter 4's GPU run of LIS at L = 10, d = 64 (results/lis/gpu-l10-d64-long.json, one H100, 2026-11-28): the
file is the run the chapter describes, and every statement it makes of it holds and can fail."""
import copy

from energylab.claims import lis as lis_claims
from energylab.engine.committed import load_committed


def test_the_file_is_the_run_the_chapter_describes():
    results, provenance = load_committed("lis", "gpu-l10-d64-long")
    assert results.config["lengths"] == [10] and results.config["dims"] == [64]
    assert results.config["seeds"] == [0, 1, 2, 3] and results.config["steps"] == 4800
    assert results.config["lr"] == 3e-3 and results.config["batch_size"] == 64
    assert "H100" in provenance["machine"]["gpu"] and provenance["dirty"] is False


def test_its_claims_hold_and_can_fail():
    results, _ = load_committed("lis", "gpu-l10-d64-long")
    claims = lis_claims.gpu_claims(results)
    assert all(claims.values()), {k: v for k, v in claims.items() if not v}
    assert (lis_claims.first_step(results, "MHA-only", 0.5), lis_claims.first_step(results, "MHA2nd1st-only", 0.5)) \
        == (3120, 3600)
    # had MHA2nd1st-only's seeds been ahead by 0.2 from the middle of the run on, two claims would fail
    faster = copy.deepcopy(results)
    for label, h in faster.histories.items():
        if "MHA2nd1st-only" in label:
            c = h.curves["eval/exact"]
            h.curves["eval/exact"] = c[:8] + [v + 0.2 for v in c[8:]]
    failed = [k for k, v in lis_claims.gpu_claims(faster).items() if not v]
    assert any("no earlier" in k for k in failed) and any("separates" in k for k in failed)
