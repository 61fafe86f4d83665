"""Issue 57: 9×9 Sudoku at a paper-like width on one GPU: the looped Transformer against Hyper-SET.

    python scripts/gpu/sudoku9.py --out DIR --budget SECONDS [--dim 256] [--tiny]

Both layers train on the same SATNet-like boards with the same recipe (``sudoku`` experiment's ``medium`` profile:
d = 256, 8 heads, T = 16, batch 100, AdamW lr 5e-4 with warm-up and cosine, bf16 autocast) for the **same number of
steps**: a short timing of each layer's training step first, then the step count that fits both into ``--budget``
seconds of training. Each is then evaluated at T/2, T, 2T, 4T on SATNet-like, RRN-like and RRN-17 boards.
Writes ``DIR/sudoku9.json`` (both layers' Results, the step count, the timings, the machine) and
``DIR/sudoku9_models.pt`` (the two trained state dicts, for evaluation elsewhere).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

LAYERS = ("transformer", "hyperset")


def step_seconds(config, train_data, device, steps: int = 12) -> float:
    """Seconds per training step of ``config.layer`` (forward, backward, AdamW; after 4 warm-up steps)."""
    import torch

    from energylab.experiments import sudoku

    torch.manual_seed(0)
    model = sudoku.make_model(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr)
    batch, _ = sudoku.epoch_batches(train_data, config.batch_size, 0)
    amp = config.amp and device.type == "cuda"

    def one(step):
        tokens, target, mask = (t.to(device) for t in batch(step))
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss, _ = sudoku.blank_loss(model, (tokens, target, mask))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for s in range(4):
        one(s)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for s in range(steps):
        one(4 + s)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget", type=float, default=420, help="seconds of training for both layers together")
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--tiny", action="store_true", help="CPU rehearsal: d = 32, 200 train / 50 test boards")
    args = parser.parse_args(argv)
    import torch

    from energylab._setup import choose_device
    from energylab.experiments import sudoku

    start = time.time()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = choose_device("cpu" if args.tiny else "cuda")
    base = dataclasses.replace(sudoku.PROFILES["medium"], dim=args.dim, progress=False, n_trace=0, seeds=(0,),
                               device=str(device))
    if args.tiny:
        base = dataclasses.replace(base, dim=32, heads=4, n_train=200, n_test=50, n_eval=50, batch_size=20,
                                   iterations=4, test_iterations=(2, 4, 8), warmup_steps=2, eval_every=0)
    train_data = sudoku.load_set(base.train_set, "train", base.n_train, base.size, base.data_seed)
    per_step = {name: step_seconds(dataclasses.replace(base, layer=name), train_data, device) for name in LAYERS}
    per_epoch = base.n_train // base.batch_size
    # the same number of steps for both; evaluation (about 5% of the budget at the medium sizes) is not counted
    steps = int(args.budget / sum(per_step.values()))
    epochs = max(1, steps // per_epoch)
    record = {"machine": {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)
                          if device.type == "cuda" else None},
              "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "seconds_per_step": per_step, "epochs": epochs, "steps": epochs * per_epoch,
              "budget_seconds": args.budget, "results": {}, "train_seconds": {}}
    print(f"[{time.time() - start:.0f}s] s/step {per_step}; {epochs} epochs = {epochs * per_epoch} steps each",
          flush=True)
    models = {}
    for name in LAYERS:
        config = dataclasses.replace(base, layer=name, epochs=epochs)
        t0 = time.time()
        torch.manual_seed(0)
        first = sudoku.load_set(config.test_sets[0], "test", config.n_eval, config.size, config.data_seed)
        T = config.iterations
        model, history = sudoku.train_seed(config, 0, train_data, device=device,
                                           eval_fn=lambda m: sudoku.test_time(m, first, (T,))[T])
        record["train_seconds"][name] = round(time.time() - t0, 1)
        results = sudoku.evaluate(config, {0: model})
        results.histories["seed0"] = history
        record["results"][name] = results.to_dict()
        models[name] = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        (out / "sudoku9.json").write_text(json.dumps(record, default=str))
        torch.save({"config": {n: dataclasses.asdict(dataclasses.replace(base, layer=n, epochs=epochs))
                               for n in models}, "state_dicts": models}, out / "sudoku9_models.pt")
        print(f"[{time.time() - start:.0f}s] {name}: trained {record['train_seconds'][name]} s; "
              + ", ".join(f"{k}={v:.3f}" for k, v in results.final.items() if "board" in k), flush=True)
    record["seconds"] = round(time.time() - start, 1)
    (out / "sudoku9.json").write_text(json.dumps(record, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
