"""The weights' moving average of the training engine (TrainConfig.ema, energylab.engine.train.WeightAverage)."""
import pytest
import torch
from torch import nn

from energylab.engine.ensemble import train_ensemble
from energylab.engine.train import TrainConfig, train


def problem():
    torch.manual_seed(0)
    x = torch.randn(64, 3, dtype=torch.float64)
    y = x @ torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)

    def batches(step):
        i = torch.arange(step * 8, step * 8 + 8) % 64
        return x[i], y[i]

    def loss(model, batch):
        return ((model(batch[0]).squeeze(-1) - batch[1]) ** 2).mean(), {}

    return batches, loss


def model():
    torch.manual_seed(1)
    return nn.Linear(3, 1).double()


def config(**kw):
    return TrainConfig(**{"steps": 12, "lr": 0.05, "device": "cpu", "progress": False, **kw})


def test_model_ends_holding_the_average_of_the_iterates():
    batches, loss = problem()
    net, iterates = model(), []
    avg = [p.detach().clone() for p in net.parameters()]
    train(net, loss, batches, config(ema=0.9), after_step=lambda m, s: iterates.append(
        [p.detach().clone() for p in m.parameters()]))
    for it in iterates:  # after_step runs after the average's update, which read the same weights
        avg = [0.9 * a + 0.1 * w for a, w in zip(avg, it)]
    for got, want in zip(net.parameters(), avg):
        assert torch.allclose(got, want, rtol=0, atol=1e-14)
    assert not torch.allclose(iterates[-1][0], avg[0])  # the average is not the last iterate


def test_evaluation_sees_the_average_and_training_goes_on_from_the_iterate():
    batches, loss = problem()
    plain, averaged = model(), model()
    seen = []
    train(plain, loss, batches, config())
    h = train(averaged, loss, batches, config(ema=0.5, eval_every=6),
              eval_fn=lambda m: seen.append([p.detach().clone() for p in m.parameters()]) or {"w": m.weight[0, 0]})
    # the iterates are untouched by the average: ema=0.5's last iterate is plain training's final model
    assert len(seen) == 2 and not torch.equal(seen[-1][0], plain.weight.detach())
    assert torch.equal(seen[-1][0], averaged.weight.detach())  # the model leaves with what evaluation saw
    assert h.curves["eval/w"][-1] == float(averaged.weight[0, 0])


def test_resume_with_average_is_exact(tmp_path):
    batches, loss = problem()
    whole = model()
    train(whole, loss, batches, config(ema=0.8))
    first = model()
    with pytest.raises(KeyboardInterrupt):
        train(first, loss, batches, config(ema=0.8, checkpoint_every=5), out_dir=str(tmp_path / "r"),
              after_step=lambda m, s: _stop(s == 7))
    resumed = model()
    train(resumed, loss, batches, config(ema=0.8, checkpoint_every=5), out_dir=str(tmp_path / "r"), resume=True)
    for a, b in zip(whole.parameters(), resumed.parameters()):
        assert torch.equal(a, b)


def _stop(now: bool):
    if now:
        raise KeyboardInterrupt


def test_bad_values_are_refused():
    batches, loss = problem()
    for bad in (1.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="ema"):
            train(model(), loss, batches, config(ema=bad))
    with pytest.raises(ValueError, match="ema"):
        train_ensemble(lambda: model(), loss, batches, config(ema=0.9), seeds=[0, 1])
