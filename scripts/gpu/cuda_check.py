"""Issue 56: does every chapter and experiment run on CUDA, and how fast are the attention layers there?

    python scripts/gpu/cuda_check.py --out DIR [--deadline S] [--workers K] [--parts bench,experiments,chapters]
    python scripts/gpu/cuda_check.py --out DIR --tiny      # a CPU rehearsal: one chapter, one experiment, quick bench

Writes ``DIR/cuda_check.json`` after every item (a run cut off by its deadline keeps what finished):
``items``: one row per chapter (executed with nbclient, its ``device`` parameter set to "cuda", as papermill would)
and per experiment's quick profile (``python -m energylab run NAME --profile quick --device cuda``), with
``status`` ("pass", "fail", "timeout", "not started") and wall seconds; ``bench``: the rows of ``python -m
energylab.bench attention`` on the device in float32 and bfloat16 at 256 to 16,384 tokens. The bench runs first and
alone (its ratios would otherwise measure the other jobs); then chapters and experiments run side by side.
"""
from __future__ import annotations

import argparse
import concurrent.futures as futures
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def write(path: pathlib.Path, record: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, default=str))
    tmp.replace(path)


def machine() -> dict:
    import torch

    info = {"python": platform.python_version(), "torch": torch.__version__, "cpu": platform.processor(),
            "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def bench_rows(device: str, tiny: bool, deadline: float, record: dict, path: pathlib.Path) -> None:
    from energylab.bench import attention

    plan = [("float32", (64,))] if tiny else [(d, n) for n in attention.CUDA_TOKENS for d in ("float32", "bfloat16")]
    for dtype, n in plan:
        if time.time() > deadline:
            record["bench_skipped"].append(f"{dtype}/{n}")
            continue
        t0 = time.time()
        try:
            rows = attention.run(quick=tiny, device=device, dtype=dtype, tokens=(n,) if not tiny else None)
            record["bench"].extend(rows)
        except Exception as err:  # noqa: BLE001 - a failed size is a result to record, not a reason to stop
            record["bench"].append({"dtype": dtype, "tokens": n, "error": f"{type(err).__name__}: {err}"[:2000]})
        record["bench_seconds"][f"{dtype}/{n}"] = round(time.time() - t0, 1)
        write(path, record)


def run_chapter(nb_path: str, device: str, timeout: float) -> dict:
    """Execute the chapter in a process of its own (see :func:`execute_chapter`); its result row."""
    cmd = [sys.executable, __file__, "--out", "-", "--chapter", nb_path, "--device", device,
           "--deadline", str(timeout)]
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 30, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "seconds": round(time.time() - t0, 1)}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"status": "fail", "seconds": round(time.time() - t0, 1), "error": (proc.stderr or "")[-3000:]}


def execute_chapter(nb_path: str, device: str, timeout: float) -> dict:
    """Execute a copy of the chapter with ``device`` injected into its parameters cell, as papermill would."""
    import nbclient
    import nbformat
    from jupyter_client.manager import KernelManager

    nb = nbformat.read(nb_path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            cell.source += f"\ndevice = {device!r}  # injected by scripts/gpu/cuda_check.py\n"
            break
    else:
        return {"status": "fail", "error": "no parameters cell"}
    km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(tempfile.mkdtemp(), "kernel"))
    client = nbclient.NotebookClient(nb, km=km, timeout=int(timeout), resources={"metadata": {
        "path": str(pathlib.Path(nb_path).parent)}})
    t0 = time.time()
    try:
        client.execute()
        return {"status": "pass", "seconds": round(time.time() - t0, 1)}
    except nbclient.exceptions.CellTimeoutError:
        return {"status": "timeout", "seconds": round(time.time() - t0, 1)}
    except Exception as err:  # noqa: BLE001
        return {"status": "fail", "seconds": round(time.time() - t0, 1), "error": str(err)[-3000:]}


def run_experiment(name: str, device: str, timeout: float, out_root: str) -> dict:
    out = os.path.join(out_root, name)
    cmd = [sys.executable, "-m", "energylab", "run", name, "--profile", "quick", "--device", device, "--out", out,
           "--threads", "1"]
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "seconds": round(time.time() - t0, 1)}
    row = {"status": "pass" if proc.returncode == 0 else "fail", "seconds": round(time.time() - t0, 1),
           "rc": proc.returncode}
    if proc.returncode == 0:
        row["final"] = proc.stdout.strip().splitlines()[-12:]
    else:
        row["error"] = (proc.stderr or proc.stdout)[-3000:]
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--deadline", type=float, default=420, help="seconds from start after which nothing starts")
    parser.add_argument("--bench-deadline", type=float, default=150, help="seconds from start for the bench")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--parts", default="bench,experiments,chapters")
    parser.add_argument("--only", default=None, help="comma-separated chapter stems / experiment names to run")
    parser.add_argument("--tiny", action="store_true", help="CPU rehearsal: chapter 1, experiment alternating")
    parser.add_argument("--chapter", default=None, help=argparse.SUPPRESS)  # one chapter, its row as JSON
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.chapter:
        print(json.dumps(execute_chapter(args.chapter, args.device, args.deadline)))
        return 0
    start = time.time()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "cuda_check.json"
    import torch

    from energylab import experiments

    device = "cpu" if args.tiny else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA device", file=sys.stderr)
        return 2
    record = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "device": device, "items": {}, "bench": [], "bench_seconds": {}, "bench_skipped": []}
    parts = set(args.parts.split(","))
    if "bench" in parts:
        bench_rows(device, args.tiny, start + args.bench_deadline, record, path)
        print(f"[{time.time() - start:.0f}s] bench done", flush=True)
    chapters = sorted(str(p) for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    names = [r["experiment"] for r in experiments.describe() if r["profile"] == "quick"]
    if args.tiny:
        chapters, names = chapters[:1], ["alternating"]
    if args.only:
        only = set(args.only.split(","))
        chapters = [c for c in chapters if pathlib.Path(c).stem in only]
        names = [n for n in names if n in only]
    jobs = []
    if "chapters" in parts:
        jobs += [("chapter", p) for p in chapters]
    if "experiments" in parts:
        jobs += [("experiment", n) for n in names]
    for kind, item in jobs:
        record["items"][f"{kind}:{pathlib.Path(item).stem}"] = {"status": "not started"}
    write(path, record)
    run_root = tempfile.mkdtemp(prefix="cuda-check-")

    def job(kind, item):
        left = start + args.deadline - time.time()
        if left < 20:
            return {"status": "not started"}
        if kind == "chapter":
            return run_chapter(item, device, left)
        return run_experiment(item, device, left, run_root)

    with futures.ThreadPoolExecutor(args.workers) as pool:
        todo = {pool.submit(job, kind, item): f"{kind}:{pathlib.Path(item).stem}" for kind, item in jobs}
        for done in futures.as_completed(todo):
            record["items"][todo[done]] = done.result()
            print(f"[{time.time() - start:.0f}s] {todo[done]}: {record['items'][todo[done]]['status']}", flush=True)
            write(path, record)
    record["seconds"] = round(time.time() - start, 1)
    write(path, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
