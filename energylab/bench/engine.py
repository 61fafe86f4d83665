"""Bench section "engine": the training engine against a bare PyTorch loop, and seed ensembles.

Rows (all ratios measured in the same run on the same tiny NT model, N2T5 at N_con = 16, 802 parameters):

- ``engine_overhead``: time per step of :func:`energylab.train.train` over a bare ``zero_grad / backward / step``
  loop with the same model, optimiser and batches (target <= 1.10);
- ``ensemble_speedup``: S = 8 sequential ``train`` runs over one vmapped :func:`energylab.ensemble.train_ensemble`
  run of the 8 seeds (target >= 3).
"""
from __future__ import annotations

import torch

from energylab.bench import median_time
from energylab.ensemble import train_ensemble
from energylab.models.nt import NTModel, NTModelConfig, accuracy, squared_error
from energylab.tasks import nt
from energylab.train import TrainConfig, train

S = 8  # ensemble size of the target


def _setup(steps: int):
    config = NTModelConfig(N=2, n_con=16, attention="EA")
    data = [nt.batch(2, 5, 16, 40, generator=torch.Generator().manual_seed(i)) for i in range(steps)]

    def loss_fn(model, batch):
        x, y = batch
        out = model(x)
        return squared_error(out, y), {"acc": accuracy(out, y)}

    train_cfg = TrainConfig(steps=steps, optimizer="sgd", lr=0.02, momentum=0.8, progress=False, device="cpu")
    return config, data, loss_fn, train_cfg


def run(quick: bool) -> list[dict]:
    steps, repeats = (20, 3) if quick else (100, 5)
    config, data, loss_fn, train_cfg = _setup(steps)

    def bare():
        torch.manual_seed(0)
        model = NTModel(config)
        opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.8)
        for step in range(steps):
            loss, _ = loss_fn(model, data[step])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    def engine():
        torch.manual_seed(0)
        train(NTModel(config), loss_fn, lambda step: data[step], train_cfg)

    def sequential():
        for seed in range(S):
            torch.manual_seed(seed)
            train(NTModel(config), loss_fn, lambda step, s=seed: data[(step + s) % steps], train_cfg)

    def ensemble():
        train_ensemble(lambda seed: NTModel(config), loss_fn, lambda step, s: data[(step + s) % steps], train_cfg,
                       list(range(S)), vmapped=True)

    t_bare, t_engine = median_time(bare, repeats), median_time(engine, repeats)
    t_seq, t_ens = median_time(sequential, max(1, repeats // 2), 1), median_time(ensemble, max(1, repeats // 2), 1)
    return [
        {"case": "engine_overhead", "model": "NT N2T5 N_con=16", "steps": steps, "ratio": t_engine / t_bare,
         "target": "<= 1.10", "reference": "bare PyTorch loop", "ms_per_step_ref": 1e3 * t_bare / steps},
        {"case": "ensemble_speedup", "model": "NT N2T5 N_con=16", "steps": steps, "ratio": t_seq / t_ens,
         "target": f">= 3 (S={S})", "reference": f"{S} sequential train() runs",
         "ms_per_step_ref": 1e3 * t_seq / steps},
    ]
