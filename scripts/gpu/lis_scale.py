"""Issue 58: LIS at paper 000's scale on one GPU: MHA-only against MHA2nd1st-only, several seeds, timed crossings.

    python scripts/gpu/lis_scale.py --variant MHA-only --out DIR --budget SECONDS [--length 10] [--dim 64] [--tiny]

The ``lis`` experiment at L = 10, d = 64 with the paper's recipe (App. A.9: 51,200 training samples, batch 128,
AdamW(0.9, 0.999), lr 1e-4 constant, weight decay 0.01, 3 layers, dropout 0.1), attention only, the seeds trained
as one vmapped ensemble. A constant learning rate makes the run's length free: a short timing of the training step
and of one evaluation first, then as many epochs as fit ``--budget`` seconds. Exact match (greedy answer after
the model's own trace) on 1,024 test samples every 200 steps times the 50% and 80% crossings.
Writes ``DIR/lis_<variant>.json`` (Results, the timings, the machine).
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget", type=float, default=240)
    parser.add_argument("--length", type=int, default=10)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--tiny", action="store_true", help="CPU rehearsal: L = 4, d = 16, 1,280 samples")
    args = parser.parse_args(argv)
    import torch

    from energylab.ensemble import train_ensemble
    from energylab.experiments import lis as exp
    from energylab.tasks import lis
    from energylab.train import TrainConfig

    start = time.time()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = "cpu" if args.tiny else "cuda"
    config = exp.Config(lengths=(args.length,), dims=(args.dim,), variants=(args.variant,), n_test=1024,
                        eval_every=200, eval_at_start=True, greedy_answer=True, last_k=2,
                        seeds=tuple(range(args.seeds)), device=device, progress=False)
    if args.tiny:
        config = dataclasses.replace(config, lengths=(4,), dims=(16,), high=24, n_train=1280, n_test=128,
                                     eval_every=10, seeds=(0, 1))
    length, dim = config.lengths[0], config.dims[0]
    # timing: the same ensemble's steps and one evaluation, on the real data
    data = lis.make_data(length, config.n_train, config.n_test, config.high, seed=config.data_seed)
    batches = exp.EpochBatches(data.train, config.batch_size)
    probe_steps = 30
    cfg = TrainConfig(steps=probe_steps, lr=config.lr, weight_decay=config.weight_decay, betas=config.betas,
                      log_every=10, device=device, progress=False)
    eval_fn = exp.make_eval_fn(data.test, length, greedy_answer=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="There is a performance drop", category=UserWarning)
        t0 = time.time()
        probe = train_ensemble(lambda s: exp.make_model(config, length, dim, args.variant), exp.make_loss_fn(length),
                               batches, cfg, config.seeds)
        per_step = (time.time() - t0) / probe_steps  # includes start-up: an upper bound
    model = probe.models[0].to(device).eval()
    t0 = time.time()
    with torch.no_grad():
        eval_fn(model)
    per_eval = (time.time() - t0) * len(config.seeds)
    per_epoch = batches.steps_per_epoch
    epoch_seconds = per_epoch * per_step + (per_epoch / config.eval_every) * per_eval
    epochs = max(1, int((args.budget - (time.time() - start)) / epoch_seconds))
    config = dataclasses.replace(config, epochs=epochs)
    print(f"[{time.time() - start:.0f}s] {args.variant}: {per_step * 1e3:.1f} ms/step, {per_eval:.2f} s/eval; "
          f"{epochs} epochs = {epochs * per_epoch} steps", flush=True)
    t0 = time.time()
    results = exp.run(config)
    record = {"machine": {"torch": torch.__version__,
                          "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None},
              "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "seconds_per_step_probe": per_step, "seconds_per_eval_probe": per_eval,
              "train_seconds": round(time.time() - t0, 1), "steps": epochs * per_epoch,
              "results": results.to_dict()}
    (out / f"lis_{args.variant}.json").write_text(json.dumps(record, default=str))
    print(f"[{time.time() - start:.0f}s] {args.variant}: " + ", ".join(f"{k}={v:.3f}" for k, v in
                                                                     results.final.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
