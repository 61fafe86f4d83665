"""Commit what a device call of ``scripts/gpu/lease*.sh`` measured, with the device in the provenance.

    python scripts/gpu/commit_results.py --call1 DIR1 --call2 DIR2

DIR1/DIR2: the unpacked ``gpu.tgz`` of the two calls of 2026-11-27 (call 1 at commit 9d9336e, before the CUDA
fixes; call 2 at a3bb3af, after them). Writes results/bench/attention-cuda.json (call 2) and
attention-cuda-tiled.json (call 1: the tiled CPU kernels still ran on CUDA), results/bench/cuda-check.json (every
chapter and quick profile on CUDA, both calls), results/sudoku/gpu-9x9-d256.json and results/lis/gpu-l10-d64.json.
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
         2: {"commit": "a3bb3afaccd35f61f7d0481feac837880b223f76", "script": "scripts/gpu/lease2.sh"}}


def provenance(call: int, record: dict, command: str, seconds) -> dict:
    machine = record.get("machine", {})
    gpu = machine.get("gpu") or "NVIDIA H200"
    return {"machine": {"accelerator": f"{gpu} (torch {machine.get('torch', '?')})", "gpu": gpu,
                        "torch": machine.get("torch"), "python": machine.get("python"), "cuda": machine.get("cuda"),
                        "processor": "x86-64 host of the GPU, 16 cores", "cpu_cores": 16,
                        "lease": "device tool, one H200, 2026-11-27"},
            "commit": CALLS[call]["commit"], "dirty": False, "numerics": "CUDA (not pinned)",
            "date": record.get("started", "2026-11-27").replace(" UTC", "+00:00").replace(" ", "T"),
            "command": f"bash {CALLS[call]['script']}  # {command}", "seconds": seconds}


def save(results: Results, prov: dict, path: str) -> None:
    data = results.to_dict()
    data["provenance"] = prov
    (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
    write_json(str(ROOT / path), data)
    print("wrote", path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--call1", required=True)
    parser.add_argument("--call2", required=True)
    args = parser.parse_args(argv)
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
    merged = Results("lis", {"recipe": rec["recipe"], "steps": rec["steps"],
                             **{k: v for k, v in rec["results"]["MHA-only"]["config"].items() if k != "variants"}})
    for variant, r in rec["results"].items():
        res = Results.from_dict(r)
        merged.histories.update(res.histories)
        merged.final.update(res.final)
        merged.tables.setdefault("grid", []).extend(res.tables["grid"])
        merged.extra["baselines"] = res.extra["baselines"]
    merged.extra.update(timings=rec["timings"], train_seconds=rec["train_seconds"])
    save(merged, provenance(2, rec, "python scripts/gpu/lis_scale.py --budget 135 --recipe book",
                            sum(rec["train_seconds"].values())), "results/lis/gpu-l10-d64.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
