"""The work per board (issue 51, item 5): the matrix-product FLOPs of one forward, counted by torch and checked here
against a count by hand."""
import pytest
import torch
from torch import nn

from energylab.models import matmul_flops
from energylab.models.looped import LoopedConfig, LoopedModel


def test_the_transformer_looped_model_matches_the_count_by_hand():
    n, d, size, T = 81, 64, 9, 16
    model = LoopedModel(LoopedConfig(size=size, dim=d, heads=4, ffn_mult=4, layer="transformer", iterations=T))
    per_iteration = (4 * n * d * d  # Q, K, V and output projections
                     + 2 * n * d * 4 * d  # the feedforward's two maps
                     + 2 * n * n * d)  # scores and the weighted sum, over all heads
    readout = n * d * size
    assert model.work() == 2 * (T * per_iteration + readout)  # 2 FLOPs per multiply-add
    assert model.work(2 * T) - model.work(T) == 2 * T * per_iteration  # linear in the iterations


@pytest.mark.parametrize("layer", ["itrsa", "akorn", "hyperset"])
def test_every_league_layer_has_a_positive_work_linear_in_the_iterations(layer):
    model = LoopedModel(LoopedConfig(size=4, dim=16, heads=2, ffn_mult=2, layer=layer, iterations=3))
    w1, w2, w3 = (model.work(t) for t in (1, 2, 3))
    assert 0 < w1 < w2 < w3 and w3 - w2 == w2 - w1


def test_matmul_flops_counts_products_only_and_leaves_the_model_as_it_was():
    lin = nn.Linear(5, 3, bias=False)
    x = torch.randn(7, 5)
    assert matmul_flops(nn.Sequential(lin, nn.Softmax(-1)), x) == 2 * 7 * 5 * 3  # the softmax is not counted
    assert lin.weight.grad is None and torch.is_grad_enabled()


def test_board_work_reads_a_committed_runs_config():
    """experiments.sudoku.board_work builds the layer from a run's recorded config (no weights): the 9×9
    augmented run's Transformer at T is the same model as LoopedModel.work counts by hand above."""
    from energylab.engine.committed import load_committed
    from energylab.experiments import sudoku as S

    run, _ = load_committed("sudoku", "aug-cpu-9x9")
    cfg = run.config
    T = cfg["iterations"]
    model = LoopedModel(LoopedConfig(size=9, dim=cfg["dim"], heads=cfg["heads"], ffn_mult=cfg["ffn_mult"],
                                     layer="transformer", iterations=T))
    assert S.board_work(cfg, "transformer", T) == model.work(T)
    # ItrSA has no feedforward: the same attention's work without the two 4d maps
    ffn = 2 * 2 * 81 * cfg["dim"] * cfg["ffn_mult"] * cfg["dim"] * T
    assert S.board_work(cfg, "itrsa", T) == S.board_work(cfg, "transformer", T) - ffn
