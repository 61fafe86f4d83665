"""Bad input to the public helpers of the NT, attractor, Hyper-SET and recurrent experiments (issue 47, remaining
part): iteration counts, heads, labels, empty sets and layers without the hooks asked for, each refused naming the
argument and the accepted values instead of a raw traceback or a silent NaN."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from energylab.experiments import attractor as ax
from energylab.experiments import hyperset as hx
from energylab.experiments import nt as ntx
from energylab.experiments import recurrent as rx
from energylab.models.attractor import AttractorConfig, BareSelfAttention
from energylab.models.hyperset import HyperSET
from energylab.models.looped import LoopedConfig, LoopedModel
from energylab.models.nt import NTModel, NTModelConfig
from energylab.tasks import images as im


# ----------------------------------------------------------------------------- Hyper-SET
def _classifier(layer="hyperset"):
    torch.manual_seed(0)
    return HyperSET(4, 4, 3, dim=8, heads=2, ffn_mult=1, iterations=2, layer=layer)


@pytest.mark.parametrize("iterations, error, expected", [
    ((), ValueError, r"^iterations must hold at least one iteration count, got none"),
    ((0, 2), ValueError, r"^iterations\[\] must be an int >= 1, got 0"),
    ((-1, 2), ValueError, r"^iterations\[\] must be an int >= 1, got -1"),
    ((1.5, 2), TypeError, r"^iterations\[\] must be an int, got 1.5"),
    (2, TypeError, r"^iterations must be a collection of ints >= 1, e.g. \(4, 8\), got 2"),
])
def test_hyperset_accuracy_checks_the_iterations(iterations, error, expected):
    """Before: 0, -1 and 1.5 were skipped without a word, () a raw max() error, 2 a raw 'not iterable'."""
    x, y = torch.randn(5, 4, 4), torch.randint(0, 3, (5,))
    with pytest.raises(error, match=expected):
        hx.accuracy(_classifier(), x, y, iterations)


def test_hyperset_accuracy_checks_images_and_labels():
    """Before: no images gave a NaN accuracy, labels of 2 dims broadcast to a (B, B) comparison, labels beyond the
    classes an accuracy of 0, float labels were compared as given, all without a word."""
    model, x, y = _classifier(), torch.randn(5, 4, 4), torch.randint(0, 3, (5,))
    with pytest.raises(ValueError, match=r"^x must hold at least 1 image, got shape \(0, 4, 4\)"):
        hx.accuracy(model, x[:0], y[:0], (1,))
    with pytest.raises(ValueError, match=r"^y must have shape \(5,\), got \(5, 1\)"):
        hx.accuracy(model, x, y[:, None], (1,))
    with pytest.raises(ValueError, match=r"^y must lie in 0\.\.2 \(n_classes=3\), got values 7\.\."):
        hx.accuracy(model, x, y + 7, (1,))
    with pytest.raises(TypeError, match=r"^y must hold integer class indices, got dtype torch.float32"):
        hx.accuracy(model, x, y.float(), (1,))
    with pytest.raises(ValueError, match=r"^patches contains NaN or inf"):
        hx.accuracy(model, torch.full_like(x, float("nan")), y, (1,))
    assert set(hx.accuracy(model, x, y, (1, 2))) == {1, 2}


def test_hyperset_iteration_metrics_checks_images_and_the_layer():
    """Before: no images gave lists of NaN, a Transformer classifier a raw AttributeError."""
    x = torch.randn(3, 4, 4)
    with pytest.raises(ValueError, match=r"^x must hold at least 1 image, got shape \(0, 4, 4\) \(a mean over no "
                                         r"images is NaN\)"):
        hx.iteration_metrics(_classifier(), x[:0], 1)
    with pytest.raises(TypeError, match=r"^model must be a HyperSET classifier with a Hyper-SET layer .*got layer "
                                        r"TransformerBlock"):
        hx.iteration_metrics(_classifier("transformer"), x, 1)


@pytest.mark.parametrize("head, error, expected", [
    (2, ValueError, r"^head must lie in 0\.\.1 \(the layer has 2 heads\), got 2"),
    (-1, ValueError, r"^head must be an int >= 0, got -1"),
    (1.5, TypeError, r"^head must be an int, got 1.5"),
])
def test_hyperset_head_trajectory_checks_the_head(head, error, expected):
    """Before: head 2 of 2 and 1.5 were raw IndexErrors, head -1 silently the last head."""
    with pytest.raises(error, match=expected):
        hx.head_trajectory(_classifier(), torch.randn(1, 4, 4), 1, head=head)


def test_hyperset_head_trajectory_checks_images_and_the_layer():
    with pytest.raises(ValueError, match=r"^x must hold at least 1 image, got shape \(0, 4, 4\)"):
        hx.head_trajectory(_classifier(), torch.randn(0, 4, 4), 1)
    with pytest.raises(TypeError, match=r"^model must be a HyperSET classifier with a Hyper-SET layer"):
        hx.head_trajectory(_classifier("transformer"), torch.randn(1, 4, 4), 1)
    assert len(hx.head_trajectory(_classifier(), torch.randn(1, 4, 4), 2, head=1)) == 3


@pytest.mark.parametrize("field, value, error, expected", [
    ("n_train", 0, ValueError, r"^n_train must be an int >= 1, got 0"),
    ("n_train", -5, ValueError, r"^n_train must be an int >= 1, got -5"),
    ("n_test", 0, ValueError, r"^n_test must be an int >= 1, got 0"),
    ("n_train", 1.5, TypeError, r"^n_train must be an int, got 1.5"),
])
def test_hyperset_load_images_checks_the_counts(field, value, error, expected):
    """Before: n_train=-5 gave a training set of 1,792 images, 0 an empty one, without a word."""
    with pytest.raises(error, match=expected):
        hx.load_images(dataclasses.replace(hx.Config(), **{field: value}))


# ----------------------------------------------------------------------------- recurrent
def _looped(layer):
    torch.manual_seed(0)
    return LoopedModel(LoopedConfig(size=4, dim=8, heads=2, layer=layer, iterations=2)).eval()


def test_max_lyapunov_checks_the_board():
    """Before: a token > size was a raw IndexError, a batch of boards a message about shape (1, 2, 16), a list a raw
    TypeError."""
    model, tokens = _looped("itrsa"), torch.randint(0, 5, (16,))
    with pytest.raises(ValueError, match=r"^tokens must lie in 0\.\.4 \(0 = blank, 1\.\.4 the digits\)"):
        rx.max_lyapunov(model, tokens + 9, 2)
    with pytest.raises(ValueError, match=r"^tokens must have shape \(N=16,\): one board, got \(2, 16\)"):
        rx.max_lyapunov(model, tokens[None].repeat(2, 1), 2)
    with pytest.raises(TypeError, match=r"^tokens must be a torch.Tensor of one board's digits \(N=16,\), got list"):
        rx.max_lyapunov(model, [0] * 16, 2)
    assert isinstance(rx.max_lyapunov(model, tokens, 2), float)


def _boards():
    from energylab.tasks import sudoku as S

    return S.SudokuDataset(*S.sudoku_puzzles(S.SudokuSetConfig(givens=(6, 8), n_train=3, n_test=2, size=4), "test",
                                             cache_dir=None))


def test_akorn_trace_checks_its_arguments(tmp_path, monkeypatch):
    """Before: iterations 0 or -1 gave an empty trace without a word, an ItrSA model and a tensor of tokens raw
    AttributeErrors."""
    monkeypatch.setenv("ENERGYLAB_CACHE", str(tmp_path))
    model, data = _looped("akorn"), _boards()
    for iterations in (0, -1):
        with pytest.raises(ValueError, match=rf"^iterations must be an int >= 1, got {iterations}"):
            rx.akorn_trace(model, data, iterations, 2)
    with pytest.raises(ValueError, match=r"^k must be an int >= 1, got 0"):
        rx.akorn_trace(model, data, 1, 0)
    with pytest.raises(TypeError, match=r"^data must be a SudokuDataset, got Tensor"):
        rx.akorn_trace(model, data.tokens, 1, 2)
    with pytest.raises(TypeError, match=r"^model must be a looped model with a Kuramoto layer .*got layer ItrSA"):
        rx.akorn_trace(_looped("itrsa"), data, 1, 2)
    assert rx.akorn_trace(model, data, 1, 2)["iterations"] == [1]


def test_jacobian_norms_checks_tokens_and_seed():
    """Before: tokens=3 was a raw 'not iterable', [] returned [] without a word, seed=1.5 a raw manual_seed error."""
    with pytest.raises(TypeError, match=r"^tokens must be a collection of token counts \(ints >= 1\)"):
        rx.jacobian_norms(3, dim=4, heads=2)
    with pytest.raises(ValueError, match=r"^tokens must hold at least one token count, got none"):
        rx.jacobian_norms([], dim=4, heads=2)
    with pytest.raises(TypeError, match=r"^seed must be an int, got 1.5"):
        rx.jacobian_norms([2], dim=4, heads=2, seed=1.5)


# ----------------------------------------------------------------------------- NT
def _nt():
    torch.manual_seed(0)
    return NTModel(NTModelConfig(N=4, n_con=5))


def test_nt_weight_variation_needs_two_inputs():
    """Before: one input (or none) gave a NaN standard deviation without a word."""
    x = torch.zeros(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match=r"^x must hold at least 2 inputs, got shape \(1, 5\) \(a standard deviation "
                                         r"over fewer is NaN\)"):
        ntx.weight_variation(_nt(), x[:1])
    assert ntx.weight_variation(_nt(), x) == 0.0


def test_nt_evaluate_checks_chunk_and_data():
    """Before: chunk=-1 returned an accuracy and a loss of 0 without a word, chunk=0 a raw range() error, no windows a
    ZeroDivisionError."""
    run = ntx.NTRun("a", 4, 2, 5, 10)
    data = ntx.eval_set(run, 3, 5, 0)
    with pytest.raises(ValueError, match=r"^chunk must be an int >= 1, got -1"):
        ntx.evaluate(_nt(), data, chunk=-1)
    with pytest.raises(ValueError, match=r"^chunk must be an int >= 1, got 0"):
        ntx.evaluate(_nt(), data, chunk=0)
    with pytest.raises(ValueError, match=r"^data must map each variant to \(inputs, targets\) holding at least one "
                                         r"window, got \{\}"):
        ntx.evaluate(_nt(), {})
    assert 0 <= ntx.evaluate(_nt(), data)["acc"] <= 1


def test_nt_batches_and_baseline_check_their_counts():
    """Before: epoch=1.5 was a raw manual_seed error, n_batch=0 blamed n_predict, train_epochs=0 a raw torch.cat
    error, replace_seeds(run, 0) stored 0 seeds."""
    run = ntx.NTRun("a", 4, 2, 5, 10)
    with pytest.raises(TypeError, match=r"^epoch must be an int, got 1.5"):
        ntx.epoch_batch(run, 3, 0, 1.5)
    with pytest.raises(ValueError, match=r"^n_batch must be an int >= 1, got 0"):
        ntx.epoch_batch(run, 0, 0, 0)
    with pytest.raises(ValueError, match=r"^train_epochs must be an int >= 1, got 0"):
        ntx.constant_baseline(run, 4, 3, 5, 0, train_epochs=0)
    with pytest.raises(ValueError, match=r"^seeds must be an int >= 1, got 0"):
        ntx.replace_seeds(run, 0)


@pytest.mark.parametrize("field, value, error, expected", [
    ("attentions", (), ValueError, r"^config.attentions is empty: name at least one of 'DPA', 'EA'"),
    ("attention_maps", 0, ValueError, r"^attention_maps must be an int >= 1, got 0"),
    ("seed", 1.5, TypeError, r"^seed must be an int, got 1.5"),
    ("seeds", 1.5, TypeError, r"^seeds must be an int, got 1.5"),
    ("loss_sum", "no", TypeError, r"^loss_sum must be True or False, got 'no'"),
])
def test_nt_run_checks_its_settings_before_training(field, value, error, expected):
    """Before: attentions=() returned empty results, attention_maps=0 stored an all-NaN map, seed=1.5 trained with
    fractional seeds and loss_sum='no' summed the loss, all without a word; seeds=1.5 was a raw TypeError."""
    config = ntx.Config(runs=(ntx.NTRun("a", 2, 2, 4, 2),), seeds=2, n_batch=4, eval_every=1, n_eval_series=2,
                        n_eval_predict=3, n_final_series=2, attention_maps=2, progress=False, device="cpu")
    with pytest.raises(error, match=expected):
        ntx.run(dataclasses.replace(config, **{field: value}))


# ----------------------------------------------------------------------------- attractor
def test_attractor_corrupt_checks_the_task_and_the_images():
    """Before: an unknown task was read as 'denoise', and no images gave an MSE curve of NaN, without a word."""
    cfg, g = dataclasses.replace(ax.Config(), patch=2), torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match=r"^task must be 'masked' or 'denoise', got 'mask'"):
        ax.corrupt("mask", torch.rand(3, 4, 4), 2, cfg, g)
    torch.manual_seed(0)
    model = BareSelfAttention(AttractorConfig(n_tokens=4, patch_pixels=4, dim=8))
    with pytest.raises(ValueError, match=r"^images must hold at least 1 image, got shape \(0, 4, 4\)"):
        ax.bare_curve(model, cfg, torch.rand(0, 4, 4), "masked", 1)
    assert len(ax.bare_curve(model, cfg, torch.rand(3, 4, 4), "masked", 2)[0]) == 3


def test_attractor_statistics_checks_the_mask():
    """Before: a mask marking no position in two digits gave a NaN spread, a float mask was used as weights, and a
    target of another shape was a raw broadcasting error."""
    pred, target = torch.rand(3, 4, 4), torch.rand(3, 4, 4)
    mask = torch.zeros(3, 4, dtype=torch.bool)
    mask[0, 0] = True
    mean = torch.rand(1, 4, 4)
    with pytest.raises(ValueError, match=r"^mask must mark some position in at least two of the 3 digits: the spread "
                                         r"is a standard deviation across digits \(got at most 1 per position\)"):
        im.attractor_statistics(pred, target, mask, mean)
    mask[:, 0] = True
    with pytest.raises(ValueError, match=r"^mask must be a bool tensor of shape \(3, 4\) \(B, N\), got torch.float32"):
        im.attractor_statistics(pred, target, mask.float(), mean)
    with pytest.raises(ValueError, match=r"^pred and target must have the same shape, got \(3, 4, 4\) and \(2, 4, 4\)"):
        im.attractor_statistics(pred, target[:2], mask, mean)
    out = im.attractor_statistics(pred, target, mask, mean)
    assert all(v == v for v in out.values())  # no NaN
