"""Commit what a device call of ``scripts/gpu/lease*.sh`` measured, with the device in the provenance.

    python scripts/gpu/commit_results.py --call1 DIR1 --call2 DIR2
    python scripts/gpu/commit_results.py --lease3 DIR1 DIR2

DIR1/DIR2: the unpacked ``gpu.tgz`` of the two calls of 2026-11-27 (call 1 at commit 9d9336e, before the CUDA
fixes; call 2 at a3bb3af, after them). Writes results/bench/attention-cuda.json (call 2) and
attention-cuda-tiled.json (call 1: the tiled CPU kernels still ran on CUDA), results/bench/cuda-check.json (every
chapter and quick profile on CUDA, both calls), results/sudoku/gpu-9x9-d256.json and results/lis/gpu-l10-d64.json.

``--lease3``: the two calls of 2026-11-28 (an H100, commit 2d2e0bc): DIR1 holds call 1's files (``lease3.sh``:
four 9×9 runs with augmentation side by side with LIS), DIR2 call 2's (``sudoku9.py --runs
transformer:3e-3,hyperset:1e-3 --budget 265``, the two alone). Writes results/sudoku/gpu-9x9-aug-lr.json (call 1),
results/sudoku/gpu-9x9-aug.json (call 2) and results/lis/gpu-l10-d64-long.json (call 1).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from energylab.engine.results import Results, write_json  # noqa: E402

CALLS = {1: {"commit": "9d9336efefbaa45516582c208a406c8303a37a4d", "script": "scripts/gpu/lease.sh"},
         2: {"commit": "a3bb3afaccd35f61f7d0481feac837880b223f76", "script": "scripts/gpu/lease2.sh"},
         3: {"commit": "2d2e0bcac5eeb40de44d5b6688b65461750a03d9", "script": "scripts/gpu/lease3.sh",
             "gpu": "NVIDIA H100 80GB HBM3", "lease": "device tool, one H100, 2026-11-28"}}


def provenance(call: int, record: dict, command: str, seconds) -> dict:
    machine = record.get("machine", {})
    gpu = machine.get("gpu") or CALLS[call].get("gpu", "NVIDIA H200")
    return {"machine": {"accelerator": f"{gpu} (torch {machine.get('torch', '?')})", "gpu": gpu,
                        "torch": machine.get("torch"), "python": machine.get("python"), "cuda": machine.get("cuda"),
                        "processor": "x86-64 host of the GPU, 16 cores", "cpu_cores": 16,
                        "lease": CALLS[call].get("lease", "device tool, one H200, 2026-11-27")},
            "commit": CALLS[call]["commit"], "dirty": False, "numerics": "CUDA (not pinned)",
            "date": record.get("started", "2026-11-27").replace(" UTC", "+00:00").replace(" ", "T"),
            "command": f"bash {CALLS[call]['script']}  # {command}", "seconds": seconds}


def save(results: Results, prov: dict, path: str) -> None:
    data = results.to_dict()
    data["provenance"] = prov
    (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
    write_json(str(ROOT / path), data)
    print("wrote", path)


def sudoku_runs(rec: dict, note: str) -> Results:
    """One Results for the runs of ``sudoku9.py``'s record, each run's layer named ``layer-lr`` (e.g.
    ``transformer-3e-3``)."""
    runs = rec["results"]
    first = next(iter(runs.values()))
    merged = Results("sudoku", {"runs": list(runs), "steps": first["steps"],
                                **{k: v for k, v in first["results"]["config"].items() if k not in ("layer", "lr")}})
    for run, r in runs.items():
        key = run.replace(":", "-")
        res = Results.from_dict(r["results"])
        merged.tables.setdefault("test_time", []).extend({"layer": key, "lr": r["lr"], **row}
                                                        for row in res.tables["test_time"])
        merged.histories[f"{key}/seed0"] = res.histories["seed0"]
        merged.final.update({f"{key}/{k}": v for k, v in res.final.items()})
        merged.extra.setdefault("layers", {})[key] = {
            "layer": r["layer"], "lr": r["lr"], "test_time": res.extra["test_time"],
            "parameters": res.extra["parameters"], "seconds_per_step": r["seconds_per_step"],
            "train_seconds": r["train_seconds"]}
    merged.extra.update(budget_seconds=rec["budget_seconds"], note=note)
    return merged


def lease3(d1: pathlib.Path, d2: pathlib.Path) -> None:
    read = lambda p: json.loads(p.read_text())  # noqa: E731
    rec = read(d1 / "sudoku9.json")
    save(sudoku_runs(rec, "four runs side by side on one GPU, beside the LIS runs"),
         provenance(3, rec, f"python scripts/gpu/sudoku9.py --budget {rec['budget_seconds']:g}", rec["seconds"]),
         "results/sudoku/gpu-9x9-aug-lr.json")
    rec = read(d2 / "sudoku9b.json")
    save(sudoku_runs(rec, "the two runs side by side on one GPU, nothing else on it"),
         provenance(3, rec, "python scripts/gpu/sudoku9.py --runs transformer:3e-3,hyperset:1e-3 --budget 265",
                    rec["seconds"]), "results/sudoku/gpu-9x9-aug.json")
    rec = read(d1 / "lis_scale.json")
    save(lis_runs(rec), provenance(3, rec, "python scripts/gpu/lis_scale.py --budget 330 --recipe book",
                                   sum(rec["train_seconds"].values())), "results/lis/gpu-l10-d64-long.json")


def lis_runs(rec: dict) -> Results:
    merged = Results("lis", {"recipe": rec["recipe"], "steps": rec["steps"],
                             **{k: v for k, v in rec["results"]["MHA-only"]["config"].items() if k != "variants"},
                             "variants": list(rec["results"])})
    for r in rec["results"].values():
        res = Results.from_dict(r)
        merged.histories.update(res.histories)
        merged.final.update(res.final)
        merged.tables.setdefault("grid", []).extend(res.tables["grid"])
        merged.extra["baselines"] = res.extra["baselines"]
    merged.extra.update(timings=rec["timings"], train_seconds=rec["train_seconds"])
    return merged


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--call1")
    parser.add_argument("--call2")
    parser.add_argument("--lease3", nargs=2)
    args = parser.parse_args(argv)
    if args.lease3:
        lease3(*map(pathlib.Path, args.lease3))
        return 0
    if not (args.call1 and args.call2):
        parser.error("give --call1 and --call2, or --lease3")
    d1, d2 = pathlib.Path(args.call1), pathlib.Path(args.call2)
    read = lambda p: json.loads(p.read_text())  # noqa: E731
    for call, d, name in ((2, d2, "attention-cuda"), (1, d1, "attention-cuda-tiled")):
        rec = read(d / "c56b" / "cuda_check.json")
        res = Results("bench", {"section": "attention", "device": "cuda", "dtypes": ["float32", "bfloat16"],
                                "tokens_per_batch": 16384}, tables={"attention": rec["bench"]},
                      extra={"seconds_per_size": rec["bench_seconds"], "skipped": rec["bench_skipped"]})
        save(res, provenance(call, rec, "python scripts/gpu/cuda_check.py --parts bench",
                             sum(rec["bench_seconds"].values())), f"results/bench/{name}.json")
    rows = []
    for call, d in ((1, d1), (2, d2)):
        rec = read(d / "c56" / "cuda_check.json")
        for item, row in rec["items"].items():
            kind, what = item.split(":", 1)
            rows.append({"call": call, "commit": CALLS[call]["commit"], "kind": kind, "item": what,
                         "status": row["status"], "seconds": row.get("seconds"),
                         "error": (row.get("error") or "").strip().splitlines()[-1:] and
                         (row.get("error") or "").strip().splitlines()[-1][-300:]})
    rec1 = read(d1 / "c56" / "cuda_check.json")
    save(Results("bench", {"section": "cuda-check", "device": "cuda", "profile": "quick"}, tables={"items": rows}),
         provenance(1, rec1, "python scripts/gpu/cuda_check.py --parts experiments,chapters", None),
         "results/bench/cuda-check.json")
    rec = read(d1 / "s57" / "sudoku9.json")
    merged = Results("sudoku", {"layers": list(rec["results"]), "steps": rec["steps"], "epochs": rec["epochs"],
                                **{k: v for k, v in rec["results"]["transformer"]["config"].items() if k != "layer"}})
    for layer, r in rec["results"].items():
        res = Results.from_dict(r)
        merged.tables.setdefault("test_time", []).extend({"layer": layer, **row} for row in res.tables["test_time"])
        merged.histories[f"{layer}/seed0"] = res.histories["seed0"]
        merged.final.update({f"{layer}/{k}": v for k, v in res.final.items()})
        merged.extra.setdefault("layers", {})[layer] = {"test_time": res.extra["test_time"],
                                                        "parameters": res.extra["parameters"]}
    merged.extra.update(seconds_per_step=rec["seconds_per_step"], train_seconds=rec["train_seconds"],
                        note="beside the LIS runs and 13 chapter/quick-profile jobs on the same GPU")
    save(merged, provenance(1, rec, "python scripts/gpu/sudoku9.py --budget 198", rec.get("seconds")),
         "results/sudoku/gpu-9x9-d256.json")
    rec = read(d2 / "l58" / "lis_scale.json")
    save(lis_runs(rec), provenance(2, rec, "python scripts/gpu/lis_scale.py --budget 135 --recipe book",
                            sum(rec["train_seconds"].values())), "results/lis/gpu-l10-d64.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
