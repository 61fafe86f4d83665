"""DistributedDataParallel on CPU (gloo, 2 processes) matches the 1-process run at the same global batch."""
import json
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from energylab.engine.train import TrainConfig, init_distributed, train

D_IN, HID, D_OUT, B = 5, 13, 3, 14  # global batch B is split into 2 x 7

CFG = TrainConfig(steps=12, optimizer="adamw", lr=0.03, schedule="cosine", warmup_steps=2, grad_clip=1.0,
                  eval_every=4, progress=False, seed=3)


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(D_IN, HID), nn.Tanh(), nn.Linear(HID, D_OUT)).double()


def batches(step):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(B, D_IN, generator=g, dtype=torch.float64)
    return x, torch.cos(x[:, :D_OUT])


def loss_fn(model, batch):
    x, y = batch
    out = model(x)
    return ((out - y) ** 2).mean(), {"bias": out.mean()}


def eval_fn(model):
    x, y = batches(10_000)
    return {"mse": ((model(x) - y) ** 2).mean()}


def _worker(rank, world, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    assert init_distributed() == (rank, world)
    model = make_model()
    history = train(model, loss_fn, batches, CFG, eval_fn=eval_fn, out_dir=os.path.join(out, "ckpt"))
    if rank == 0:
        history.save(os.path.join(out, "history.json"))
        torch.save(model.state_dict(), os.path.join(out, "model.pt"))
    dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_two_processes_match_single_process(tmp_path):
    mp.spawn(_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    with open(tmp_path / "history.json") as f:
        ddp = json.load(f)
    model = make_model()
    single = train(model, loss_fn, batches, CFG, eval_fn=eval_fn)
    assert ddp["steps"] == single.steps
    for name, values in single.curves.items():
        assert ddp["curves"][name] == pytest.approx(values, rel=1e-9, abs=1e-12), name
    state = torch.load(tmp_path / "model.pt", weights_only=True)
    for k, v in model.state_dict().items():
        assert torch.allclose(state[k], v, rtol=1e-9, atol=1e-12)
    assert os.path.exists(tmp_path / "ckpt" / "checkpoint.pt")


def test_global_batch_must_split_evenly():
    from energylab.engine.batches import shard as _shard

    with pytest.raises(ValueError, match="not divisible by the world size 3"):
        _shard(torch.zeros(14, 2), 0, 3)
    x = torch.arange(14)
    assert torch.equal(torch.cat([_shard(x, r, 2) for r in range(2)]), x)
