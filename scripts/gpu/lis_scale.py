"""Issue 58: LIS at paper 000's scale on one GPU: MHA-only against MHA2nd1st-only, several seeds, timed crossings.

    python scripts/gpu/lis_scale.py --out DIR --budget SECONDS [--recipe book|paper] [--length 10] [--dim 64] [--tiny]

The ``lis`` experiment at L = 10, d = 64, attention only (the paper's left panel), the seeds of each variant trained
as one vmapped ensemble, both variants for the **same number of steps**: a short timing of each variant's step and
evaluation first, then the step count that fits both into ``--budget`` seconds. Recipes: ``paper`` (App. A.9:
batch 128, AdamW lr 1e-4 constant, weight decay 0.01) or ``book`` (chapter 4's medium/long recipe: batch 64, lr
3e-3, linear warm-up over a tenth of the run, then cosine). Exact match (the greedy answer after the model's own
trace) on 1,024 test samples, 20 times per run from step 0, times the 50% and 80% crossings.
Writes ``DIR/lis_scale.json`` (each variant's Results, the timings, the machine).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

VARIANTS = ("MHA-only", "MHA2nd1st-only")


def timing(config, variant, data) -> tuple[float, float]:
    """(seconds per training step of the variant's ensemble, seconds per evaluation of all its members)."""
    import torch

    from energylab.engine.ensemble import train_ensemble
    from energylab.engine.train import TrainConfig
    from energylab.experiments import lis as exp

    length, dim = config.lengths[0], config.dims[0]
    batches = exp.EpochBatches(data.train, config.batch_size)
    def run(steps):
        cfg = TrainConfig(steps=steps, lr=config.lr, log_every=5, device=config.device, progress=False)
        return train_ensemble(lambda s: exp.make_model(config, length, dim, variant), exp.make_loss_fn(length),
                              batches, cfg, config.seeds)

    run(5)  # warm-up: CUDA's start-up, the allocator, the first launches (the first call of 2026-11-27 timed them
    #         into the rate: 0.22 s/step against the true 0.018, and the run stopped at 800 steps)
    steps = 30
    t0 = time.time()
    ens = run(steps)
    per_step = (time.time() - t0) / steps  # a fresh run's own start-up still included: a mild upper bound
    model = ens.models[0].eval()
    t0 = time.time()
    with torch.no_grad():
        exp.make_eval_fn(data.test, length, greedy_answer=True)(model)
    return per_step, (time.time() - t0) * len(config.seeds)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget", type=float, default=240, help="seconds of training for both variants")
    parser.add_argument("--recipe", choices=("book", "paper"), default="book")
    parser.add_argument("--length", type=int, default=10)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--tiny", action="store_true", help="CPU rehearsal: L = 4, d = 16, 1,280 samples")
    args = parser.parse_args(argv)
    import torch

    from energylab.experiments import lis as exp
    from energylab.tasks import lis

    start = time.time()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = "cpu" if args.tiny else "cuda"
    recipe = {"paper": dict(batch_size=128, lr=1e-4, schedule="constant"),
              "book": dict(batch_size=64, lr=3e-3, schedule="cosine")}[args.recipe]
    config = exp.Config(lengths=(args.length,), dims=(args.dim,), n_test=1024, eval_at_start=True,
                        greedy_answer=True, last_k=2, seeds=tuple(range(args.seeds)), device=device,
                        progress=False, **recipe)
    if args.tiny:
        config = dataclasses.replace(config, lengths=(4,), dims=(16,), high=24, n_train=1280, n_test=128,
                                     seeds=(0, 1))
    data = lis.make_data(config.lengths[0], config.n_train, config.n_test, config.high, seed=config.data_seed)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="There is a performance drop", category=UserWarning)
        timings = {v: timing(config, v, data) for v in VARIANTS}
    per_epoch = config.n_train // config.batch_size
    evals = 20  # evaluations per run, from step 0
    left = args.budget - (time.time() - start)
    steps = int((left - evals * sum(e for _, e in timings.values())) / sum(s for s, _ in timings.values()))
    epochs = max(1, steps // per_epoch)
    steps = epochs * per_epoch
    config = dataclasses.replace(config, epochs=epochs, eval_every=max(1, steps // evals),
                                 warmup_steps=steps // 10 if args.recipe == "book" else 0)
    record = {"machine": {"torch": torch.__version__,
                          "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None},
              "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "recipe": args.recipe,
              "timings": timings, "steps": steps, "results": {}, "train_seconds": {}}
    print(f"[{time.time() - start:.0f}s] timings (s/step, s/eval) {timings}; {epochs} epochs = {steps} steps each",
          flush=True)
    for variant in VARIANTS:
        t0 = time.time()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="There is a performance drop", category=UserWarning)
            results = exp.run(dataclasses.replace(config, variants=(variant,)))
        record["train_seconds"][variant] = round(time.time() - t0, 1)
        record["results"][variant] = results.to_dict()
        (out / "lis_scale.json").write_text(json.dumps(record, default=str))
        curves = {k: [round(v, 3) for v in h.curves["eval/exact"]] for k, h in results.histories.items()}
        print(f"[{time.time() - start:.0f}s] {variant}: {results.final}; exact-match curves {curves}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
