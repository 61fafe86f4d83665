"""9×9 Sudoku at a paper-like width on one GPU: the looped Transformer against Hyper-SET (issues 57 and 51).

    python scripts/gpu/sudoku9.py --out DIR --budget SECONDS [--runs transformer:1e-3,hyperset:3e-3] [--tiny]

Every run trains on the same SATNet-like boards with the ``sudoku`` experiment's ``medium`` profile (d = 256,
8 heads, T = 16, batch 100, AdamW with warm-up and cosine, bf16 autocast) plus what the 9×9 CPU runs train with
(issue 51): a random Sudoku symmetry per board and step, weight decay 0.1, the weights' moving average (0.999).
``--runs`` names layer:learning-rate pairs; they train **side by side**, one process each, for the **same number
of steps**: each process times its training step (after a warm-up, while the others time theirs, so the timing
sees the same sharing of the GPU as the run), then all take the step count that fits the slowest into
``--budget`` seconds. Each model is then evaluated at T/2, T, 2T, 4T on SATNet-like, RRN-like, RRN-17 boards and
the boards that propagation cannot finish (``9x9-search``).
Writes ``DIR/sudoku9.json`` (every run's Results, the step count, the timings, the machine) and
``DIR/sudoku9_models.pt`` (the trained state dicts, the moving averages, for evaluation elsewhere).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TEST_SETS = ("satnet-like", "rrn-like", "rrn-17", "9x9-search")


def base_config(tiny: bool, device: str):
    from energylab.experiments import sudoku

    base = dataclasses.replace(sudoku.PROFILES["medium"], progress=False, n_trace=0, seeds=(0,), device=device,
                               augment=True, weight_decay=0.1, ema=0.999, test_sets=TEST_SETS)
    if tiny:
        base = dataclasses.replace(base, dim=32, heads=4, n_train=200, n_test=40, n_eval=40, batch_size=20,
                                   iterations=4, test_iterations=(2, 4, 8), warmup_steps=2, eval_every=0, amp=False)
    return base


def worker(args, index: int) -> int:
    """Run ``args.runs[index]``: time the step, wait for the others' timings, train, evaluate, save."""
    import torch

    from energylab._setup import choose_device
    from energylab.experiments import sudoku
    from energylab.tasks import sudoku_harness as harness

    name, lr = args.runs[index].split(":")
    out = pathlib.Path(args.out)
    device = choose_device("cpu" if args.tiny else "cuda")
    config = dataclasses.replace(base_config(args.tiny, str(device)), layer=name, lr=float(lr))
    train_data = harness.load_set(config.train_set, "train", config.n_train, config.size, config.data_seed)

    torch.manual_seed(1)  # the timing's model is thrown away
    model = sudoku.make_model(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr)
    batch, _ = harness.epoch_batches(train_data, config.batch_size, 0, augment=True)
    amp = config.amp and device.type == "cuda"

    def one(step):
        tokens, target, mask = (t.to(device) for t in batch(step))
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss, _ = harness.blank_loss(model, (tokens, target, mask))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def timed(steps):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for s in range(steps):
            one(s)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) / steps

    timed(6)  # CUDA's start-up, the allocator, the first launches
    per_step = timed(20)
    (out / f"probe{index}.json").write_text(json.dumps({"per_step": per_step}))
    model = opt = None  # the timing's memory goes back before the run
    deadline = time.time() + 180
    while len(list(out.glob("probe*.json"))) < len(args.runs):
        if time.time() > deadline:
            raise SystemExit(f"run {index}: the other runs' timings did not come within 180 s")
        time.sleep(0.5)
    slowest = max(json.loads(p.read_text())["per_step"] for p in out.glob("probe*.json"))
    steps = max(10, int(args.budget / slowest))
    config = dataclasses.replace(config, eval_every=max(1, steps // 6))
    first = harness.load_set(TEST_SETS[0], "test", config.n_eval, config.size, config.data_seed)
    t0 = time.time()
    model, history = sudoku.train_seed(config, 0, train_data, steps=steps, device=device,
                                       eval_fn=lambda m: harness.test_time(m, first, (config.iterations,))
                                       [config.iterations])
    train_seconds = time.time() - t0
    results = sudoku.evaluate(config, {0: model})
    results.histories["seed0"] = history
    record = {"run": args.runs[index], "layer": name, "lr": float(lr), "steps": steps, "seconds_per_step": per_step,
              "slowest_seconds_per_step": slowest, "train_seconds": round(train_seconds, 1),
              "eval_seconds": round(time.time() - t0 - train_seconds, 1), "results": results.to_dict()}
    (out / f"run{index}.json").write_text(json.dumps(record, default=str))
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, out / f"model{index}.pt")
    boards = ", ".join(f"{k}={v:.3f}" for k, v in results.final.items() if "board@" in k)
    print(f"run {index} {args.runs[index]}: {steps} steps in {train_seconds:.0f} s; {boards}", flush=True)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget", type=float, default=360, help="seconds of training of the slowest run")
    parser.add_argument("--runs", default="transformer:1e-3,transformer:3e-3,hyperset:1e-3,hyperset:3e-3",
                        type=lambda s: s.split(","), help="layer:lr pairs, trained side by side")
    parser.add_argument("--tiny", action="store_true", help="CPU rehearsal: d = 32, 200 train / 40 test boards")
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        return worker(args, args.worker)
    start = time.time()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in list(out.glob("probe*.json")) + list(out.glob("run*.json")):
        stale.unlink()
    own = [a for a in (argv if argv is not None else sys.argv[1:])]
    procs = [subprocess.Popen([sys.executable, __file__, *own, "--worker", str(i)]) for i in range(len(args.runs))]
    codes = [p.wait() for p in procs]
    import torch

    record = {"machine": {"torch": torch.__version__, "python": sys.version.split()[0],
                          "cuda": torch.version.cuda,
                          "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None},
              "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(start)), "budget_seconds": args.budget,
              "runs": args.runs, "return_codes": codes, "results": {}}
    models = {}
    for i, run in enumerate(args.runs):
        path = out / f"run{i}.json"
        if path.exists():
            record["results"][run] = json.loads(path.read_text())
            models[run] = torch.load(out / f"model{i}.pt", weights_only=True)
    record["config"] = dataclasses.asdict(base_config(args.tiny, "cuda" if not args.tiny else "cpu"))
    record["seconds"] = round(time.time() - start, 1)
    (out / "sudoku9.json").write_text(json.dumps(record, default=str))
    torch.save(models, out / "sudoku9_models.pt")
    print(f"[{record['seconds']:.0f}s] return codes {codes}; wrote {out / 'sudoku9.json'}", flush=True)
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
