"""The LIS task (energylab.tasks.lis) and the LIS experiment's plumbing (energylab.experiments.lis)."""
import itertools

import pytest
import torch

from energylab.experiments import get_config
from energylab.experiments import lis as experiment
from energylab.layers import MHA2nd1st
from energylab.models.transformer import Transformer, TransformerConfig
from energylab.tasks import lis


def brute_force_lis(seq: list[int]) -> int:
    """Length of the longest strictly increasing subsequence by trying every subset (small inputs only)."""
    best = 0
    for r in range(1, len(seq) + 1):
        for idx in itertools.combinations(range(len(seq)), r):
            values = [seq[i] for i in idx]
            if all(a < b for a, b in zip(values, values[1:])):
                best = max(best, r)
    return best


def test_dp_matches_brute_force_on_every_prefix():
    gen = torch.Generator().manual_seed(3)
    s = lis.sample_sequences(200, 7, 23, gen)
    dp = lis.lis_dp(s)
    for row, dp_row in zip(s.tolist(), dp.tolist()):
        # dp_l is the LIS ending at l, so max(dp_1..dp_l) is the LIS of the prefix s_1..s_l
        for l in range(1, 8):
            assert max(dp_row[:l]) == brute_force_lis(row[:l])


def test_dp_hand_example():
    s = torch.tensor([[30, 10, 20, 50, 40]])
    assert lis.lis_dp(s).tolist() == [[1, 1, 2, 3, 3]]


def test_samples_are_distinct_in_range_and_answers_spread():
    L, high = 11, 41
    s = lis.sample_sequences(3000, L, high, torch.Generator().manual_seed(0))
    assert s.shape == (3000, L)
    assert int(s.min()) >= L + 1 and int(s.max()) < high
    assert all(len(set(row)) == L for row in s.tolist())
    answers = lis.lis_dp(s).max(dim=1).values
    # the planted subsequence spreads answers over 1..L (a random permutation concentrates near 2 sqrt(L) ~ 6.6)
    assert int(answers.min()) <= 3 and int(answers.max()) == L
    assert len(set(answers.tolist())) >= L - 2


def test_encoding_layout():
    s = torch.tensor([[30, 10, 20, 50, 40]])
    tokens = lis.encode(s)
    o = lis.OFFSET
    assert tokens.tolist() == [[30 + o, 10 + o, 20 + o, 50 + o, 40 + o, lis.SEP,
                                1 + o, 1 + o, 2 + o, 3 + o, 3 + o, lis.SEP, 3 + o, lis.EOS]]
    assert tokens.shape[1] == lis.seq_len(5)
    x, y = lis.inputs_targets(tokens, 5)
    assert x.shape == y.shape == (1, 13)
    assert (y[0, :5] == lis.IGNORE).all() and y[0, 5] == 1 + o  # first answer token is dp_1
    assert y[0, -2] == 3 + o and y[0, -1] == lis.EOS


def test_splits_deterministic_and_disjoint():
    # inputs from [4, 10): only 6*5*4 = 120 distinct sequences, so independent draws would collide
    a = lis.make_data(3, 60, 30, high=10, seed=5)
    b = lis.make_data(3, 60, 30, high=10, seed=5)
    c = lis.make_data(3, 60, 30, high=10, seed=6)
    assert torch.equal(a.train, b.train) and torch.equal(a.test, b.test)
    assert not torch.equal(a.train, c.train)
    train_rows = {tuple(r) for r in a.train[:, :3].tolist()}
    assert not any(tuple(r) in train_rows for r in a.test[:, :3].tolist())
    assert a.test.shape == (30, lis.seq_len(3))


def test_split_impossible_raises():
    with pytest.raises(ValueError, match="unseen"):
        lis.make_data(2, 500, 100, high=5, seed=0)  # inputs from {3, 4}: only 2 distinct sequences exist


@pytest.mark.parametrize("length, high", [(0, 10), (-1, 10), (2.5, 10), (5, 10), (10, 20)])
def test_bad_sizes_raise(length, high):
    with pytest.raises(ValueError, match="length|high"):
        lis.sample_sequences(4, length, high)


def test_exact_match_counts_only_fully_correct_samples():
    L = 2
    tokens = lis.encode(torch.tensor([[4, 3], [3, 4]]))  # 8 tokens each
    x, y = lis.inputs_targets(tokens, L)
    V = lis.vocab_size(6)
    logits = torch.nn.functional.one_hot(y.clamp_min(0), V).float()  # perfect predictions
    logits[0, -1] = 0.0
    logits[0, -1, lis.PAD] = 1.0  # sample 0: wrong eos only
    logits[:, 0] = 0.0  # a wrong guess at a non-answer position does not count
    m = lis.exact_match(logits, y)
    assert float(m["exact"]) == 0.5
    assert float(m["answer"]) == 1.0
    assert float(m["token"]) == pytest.approx(9 / 10)


def test_greedy_decoding_equals_one_pass_exact_match():
    torch.manual_seed(0)
    L = 3
    data = lis.make_data(L, 64, 40, high=11, seed=1)
    model = Transformer(TransformerConfig(vocab_size=lis.vocab_size(11), dim=8, heads=2, layers=2,
                                          max_len=lis.seq_len(L), dropout=0.0), MHA2nd1st).eval()
    # an untrained model (accuracy 0), then the same model overfit to be right on some samples
    x, y = lis.inputs_targets(data.test, L)
    with torch.no_grad():
        one_pass = float(lis.exact_match(model(x), y)["exact"])
    assert float(lis.greedy_exact_match(model, data.test, L)) == one_pass
    opt = torch.optim.Adam(model.parameters(), lr=3e-2)
    loss_fn = experiment.make_loss_fn(L)
    model.train()
    for _ in range(40):
        loss, _ = loss_fn(model, data.test)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        one_pass = float(lis.exact_match(model(x), y)["exact"])
    assert 0.0 < one_pass
    assert float(lis.greedy_exact_match(model, data.test, L)) == one_pass


def test_epoch_batches_permute_each_epoch():
    tokens = torch.arange(10).unsqueeze(1)
    batches = experiment.EpochBatches(tokens, 3)
    assert batches.steps_per_epoch == 3
    epoch0 = torch.cat([batches(s, seed=0) for s in range(3)]).flatten().tolist()
    assert len(set(epoch0)) == 9  # no repeats inside an epoch
    assert torch.equal(batches(4, seed=0), batches(4, seed=0))
    epoch1 = torch.cat([batches(s, seed=0) for s in range(3, 6)]).flatten().tolist()
    assert len(set(epoch1)) == 9 and epoch1 != epoch0  # a fresh permutation every epoch
    assert torch.cat([batches(s, seed=1) for s in range(3)]).flatten().tolist() != epoch0


def test_profiles_and_registry():
    full = get_config("lis", "full")
    assert (full.lengths, full.dims, full.epochs, full.batch_size) == ((10, 20, 30, 40), (32, 64, 128, 256), 300, 128)
    assert (full.lr, full.weight_decay, full.betas, full.n_train, full.n_test) == (1e-4, 0.01, (0.9, 0.999),
                                                                                   51_200, 5_120)
    assert (full.layers, full.dropout, full.last_k) == (3, 0.1, 5)
    assert set(get_config("lis", "quick").variants) == set(experiment.VARIANTS) - {"MHA2nd1stC"}
    assert full.variants == ("MHA", "MHA-only", "MHA2nd1st", "MHA2nd1st-only")  # the paper's grid
    with pytest.raises(ValueError, match="variants"):
        experiment.run(experiment.Config(variants=("MHA3rd",)))


def test_tiny_run_end_to_end():
    config = experiment.Config(lengths=(3,), dims=(8,), variants=("MHA", "MHA2nd1st-only", "MHA2nd1stC-only"),
                               high=12, n_train=64, n_test=16, epochs=2, batch_size=16, lr=1e-3,
                               heads=2, layers=1, last_k=2,
                               seeds=(0,), progress=False, device="cpu")
    results = experiment.run(config)
    rows = {r["variant"]: r for r in results.tables["grid"]}
    assert rows["MHA"]["attention_params_per_layer"] == 4 * 8 ** 2
    assert rows["MHA2nd1st-only"]["attention_params_per_layer"] == 3 * 8 ** 2 + 2 * 2
    assert rows["MHA2nd1stC-only"]["attention_params_per_layer"] == 3 * 8 ** 2 + 2 * 2
    assert 0.0 <= rows["MHA2nd1stC-only"]["accuracy"] <= 1.0
    h = results.histories["L3/d8/MHA/seed0"]
    assert h.steps["eval/exact"] == [4, 8]
    assert 0.0 <= rows["MHA"]["accuracy"] <= 1.0
    assert rows["MHA"]["accuracy"] == pytest.approx(sum(h.curves["eval/exact"]) / 2)


def test_seed_ensemble_run():
    config = experiment.Config(lengths=(3,), dims=(8,), variants=("MHA2nd1st-only",), high=12, n_train=32,
                               n_test=16, epochs=2, batch_size=16, lr=1e-3, heads=2, layers=1, last_k=1,
                               seeds=(0, 1), progress=False, device="cpu")
    results = experiment.run(config)
    a, b = results.histories["L3/d8/MHA2nd1st-only/seed0"], results.histories["L3/d8/MHA2nd1st-only/seed1"]
    assert a.steps["loss"] == b.steps["loss"] == [2, 4]
    assert a.curves["loss"] != b.curves["loss"]  # different seeds, different runs
    row = results.tables["grid"][0]
    assert row["accuracy"] == pytest.approx((a.curves["eval/exact"][-1] + b.curves["eval/exact"][-1]) / 2)
