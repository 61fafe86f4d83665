"""What the book says about its runs on a GPU (book/how_to_run.md, "What ran on a GPU"), read from the committed
device results (scripts/gpu/commit_results.py; two calls on one H200, 2026-11-27)."""
from energylab.engine.committed import load_committed


def _items():
    results, provenance = load_committed("bench", "cuda-check")
    assert "H200" in provenance["machine"]["gpu"]
    latest = {}
    for row in results.tables["items"]:  # the later call's row replaces the earlier one
        latest[(row["kind"], row["item"])] = row
    return latest


def test_every_chapter_ran_on_cuda():
    latest = _items()
    chapters = {item: row["status"] for (kind, item), row in latest.items() if kind == "chapter"}
    assert len(chapters) == 11 and set(chapters.values()) == {"pass"}, chapters


def test_every_quick_profile_ran_on_cuda_but_forms_which_did_not_finish_in_its_window():
    latest = _items()
    experiments = {item: row["status"] for (kind, item), row in latest.items() if kind == "experiment"}
    assert experiments.pop("forms") == "timeout"
    assert len(experiments) == 8 and set(experiments.values()) == {"pass"}, experiments


def test_the_first_call_found_the_two_cuda_failures_the_second_call_fixed():
    results, _ = load_committed("bench", "cuda-check")
    failed = {(r["kind"], r["item"]) for r in results.tables["items"] if r["call"] == 1 and r["status"] == "fail"}
    assert failed == {("chapter", "04_newton_attention"), ("experiment", "lis")}
    assert all("LSE is not correctly aligned" in r["error"] for r in results.tables["items"]
               if r["call"] == 1 and r["status"] == "fail")


def _ratios(name):
    results, provenance = load_committed("bench", name)
    return {(r["layer"], r["tokens"], r["dtype"]): r["time_ratio"] for r in results.tables["attention"]
            if r.get("time_ratio") is not None}, provenance


def test_on_cuda_the_reference_paths_beat_the_tiled_cpu_kernels_by_a_wide_margin():
    before, _ = _ratios("attention-cuda-tiled")
    after, provenance = _ratios("attention-cuda")
    assert "H200" in provenance["machine"]["gpu"]
    for layer in ("MHA2nd1st", "BiSoftmaxAttention", "SigmoidAttention"):
        for n in (256, 1024, 4096):
            key = (layer, n, "float32")
            assert after[key] * 3 < before[key], (key, before[key], after[key])  # at least 3x faster


def test_on_cuda_the_composed_energy_forms_cost_several_times_sdpa():
    after, _ = _ratios("attention-cuda")
    for dtype in ("float32", "bfloat16"):
        for n in (1024, 4096):
            assert after[("MultiHeadAttention", n, dtype)] < 1.25
            for layer in ("MHA2nd1st", "BiSoftmaxAttention", "SigmoidAttention", "ExpressiveAttention"):
                assert after[(layer, n, dtype)] > 1.5, (layer, n, dtype)
