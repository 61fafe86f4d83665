"""The pieces the LIS medium profile added: the exact-answer sampler, the trace and greedy-answer metrics, the
trivial baselines and the area under the accuracy curve."""
import collections

import pytest
import torch

from energylab.engine.results import History
from energylab.experiments import get_config
from energylab.experiments import lis as experiment
from energylab.layers import MultiHeadAttention
from energylab.models.transformer import Transformer, TransformerConfig
from energylab.tasks import lis


def test_exact_answer_sampler_hits_every_target_and_spreads_them_evenly():
    L, n = 6, 3000
    s = lis.sample_sequences(n, L, 40, torch.Generator().manual_seed(0), answers=(3, 5))
    assert s.shape == (n, L) and int(s.min()) >= L + 1 and int(s.max()) < 40
    assert all(len(set(row)) == L for row in s.tolist())
    counts = collections.Counter(lis.lis_dp(s).max(dim=1).values.tolist())
    assert set(counts) == {3, 4, 5}  # never sorted (LIS = L), never below lo
    assert all(abs(c / n - 1 / 3) < 0.03 for c in counts.values())  # U{3, 4, 5}, ± 3 binomial std
    again = lis.sample_sequences(n, L, 40, torch.Generator().manual_seed(0), answers=(3, 5))
    assert torch.equal(s, again)


def test_default_sampler_unchanged_by_the_new_option():
    # the quick profile's data (and so its printed numbers) must not move: the draw order is the original one
    s = lis.sample_sequences(4, 4, 24, torch.Generator().manual_seed(0))
    t = lis.sample_sequences(4, 4, 24, torch.Generator().manual_seed(0), answers=None)
    assert torch.equal(s, t)
    assert int(lis.make_data(4, 512, 256, 24, 0).test.sum()) == 25148


@pytest.mark.parametrize("answers", [(1, 4), (3, 2), (2, 7), (2.0, 4), "24", (2, 3, 4)])
def test_bad_answer_ranges_raise(answers):
    with pytest.raises(ValueError, match="answers"):
        lis.sample_sequences(4, 6, 30, answers=answers)


def test_trace_metric_and_greedy_answer():
    L = 2
    tokens = lis.encode(torch.tensor([[4, 3], [3, 4], [5, 6]]))  # traces 11, 12, 12; answers 1, 2, 2
    x, y = lis.inputs_targets(tokens, L)
    logits = torch.nn.functional.one_hot(y.clamp_min(0), lis.vocab_size(7)).float()
    logits[1, L] = 0.0
    logits[1, L, 2 + lis.OFFSET] = 1.0  # sample 1: dp_1 wrong (2 instead of 1), answer right under teacher forcing
    m = lis.exact_match(logits, y)
    assert float(m["trace"]) == pytest.approx(2 / 3) and float(m["answer"]) == 1.0
    assert float(m["exact"]) == pytest.approx(2 / 3)


def test_greedy_answer_right_decodes_the_models_own_trace():
    L = 3
    data = lis.make_data(L, 32, 24, high=12, seed=2)
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=lis.vocab_size(12), dim=8, heads=2, layers=1,
                                          max_len=lis.seq_len(L), dropout=0.0), MultiHeadAttention).eval()
    with torch.no_grad():
        got = lis.greedy_answer_right(model, data.test, L)
        full = lis.greedy_decode(model, data.test[:, :L + 1], L + 2)
    assert torch.equal(got, full[:, 2 * L + 2] == data.test[:, 2 * L + 2])


def test_curve_auc_is_the_mean_accuracy_over_training():
    h = History()
    for step, acc in [(0, 0.0), (100, 0.5), (300, 1.0)]:
        h.log(step, {"exact": acc}, prefix="eval/")
    # trapezoids: 100 * 0.25 + 200 * 0.75 = 175, over 300 steps
    assert experiment.curve_auc(h) == pytest.approx(175 / 300)
    one = History()
    one.log(5, {"exact": 1.0}, prefix="eval/")
    with pytest.raises(ValueError, match="2 evaluations"):
        experiment.curve_auc(one)


def test_trivial_baselines_count_the_most_frequent_answer_and_trace():
    s = torch.tensor([[10, 11, 12], [12, 11, 10], [11, 10, 12], [10, 11, 12]])  # traces 123, 111, 112, 123
    base = experiment.trivial_baselines(lis.encode(s), 3)
    assert base == {"answer": 0.5, "trace": 0.5}
    u = lis.make_data(8, 16, 4000, answers=(3, 7), seed=0)
    base = experiment.trivial_baselines(u.test, 8)
    assert abs(base["answer"] - 0.2) < 0.02 and base["trace"] < 0.05  # U{3..7}: no answer above 1/5


def test_medium_profile_settings():
    m = get_config("lis", "medium")
    assert m.dims == (32,) and all(6 <= L <= 10 for L in m.lengths)
    assert {"MHA-only", "MHA2nd1st-only", "MHA2nd1stC-only"} <= set(m.variants)
    assert len(m.seeds) == 3 and m.n_train >= 10_000 and m.lr == 3e-3  # pilot: 1e-3 stayed on the plateau
    assert m.schedule == "cosine" and m.warmup_steps > 0 and m.eval_at_start and m.greedy_answer
    spe = m.n_train // m.batch_size
    assert 2000 <= m.epochs * spe <= 4000
    assert set(experiment.COST) == set(experiment.PROFILES)


def test_run_reports_auc_trace_answer_and_baselines():
    config = experiment.Config(lengths=(4,), dims=(8,), variants=("MHA-only",), high=20, answers=(2, 3),
                               n_train=64, n_test=32, epochs=2, batch_size=16, lr=1e-3, heads=2, layers=1,
                               last_k=1, warmup_steps=2, schedule="cosine", eval_every=2, eval_at_start=True,
                               greedy_answer=True, seeds=(0, 1), progress=False, device="cpu")
    results = experiment.run(config)
    h = results.histories["L4/d8/MHA-only/seed0"]
    assert h.steps["eval/exact"] == [0, 2, 4, 6, 8]
    row = results.tables["grid"][0]
    aucs = [experiment.curve_auc(results.histories[f"L4/d8/MHA-only/seed{s}"]) for s in (0, 1)]
    assert row["auc"] == pytest.approx(sum(aucs) / 2)
    answers = [results.histories[f"L4/d8/MHA-only/seed{s}"].curves["eval/answer_greedy"][-1] for s in (0, 1)]
    assert row["answer"] == pytest.approx(sum(answers) / 2)
    assert set(results.extra["baselines"]["4"]) == {"answer", "trace"}
