"""NT tasks (paper 001): exact cycle structure, series rules, windows; the testbed model; the experiment."""
import dataclasses

import pytest
import torch

from energylab.models import count_parameters
from energylab.models.nt import NTModel, NTModelConfig, accuracy, squared_error
from energylab.tasks import nt, one_hot


def test_cycle_structure_matches_the_paper():
    assert nt.cycle_lengths(16, 2) == {56: 64, 28: 16, 14: 4, 7: 1, 1: 1}  # eq. (7)
    assert 64 * 56 + 16 * 28 + 4 * 14 + 7 + 1 == 16 ** 3
    assert round(nt.mean_cycle_length(16, 2), 1) == 47.6
    assert round(nt.mean_cycle_length(16, 2, "NT-S"), 1) == 23.8
    assert nt.cycle_lengths(16, 3) == {120: 512, 60: 64, 30: 8, 15: 1, 1: 1}  # eq. (6)
    assert nt.cycle_lengths(2, 1) == {3: 1, 1: 1}  # XOR: 011011..., 000...
    assert nt.cycle_lengths(2, 5) == {63: 1, 1: 1}  # N2T5: one cycle of 63 and the zero state


@pytest.mark.parametrize("N,tau", [(2, 3), (3, 2), (5, 1), (7, 2), (11, 1)])
@pytest.mark.parametrize("variant", ["NT", "NT-S"])
def test_cycles_account_for_all_states(N, tau, variant):
    cycles = nt.cycle_lengths(N, tau, variant)
    assert sum(length * count for length, count in cycles.items()) == N ** (tau + 1)
    nxt = nt.state_map(N, tau, variant)
    assert sorted(nxt.tolist()) == list(range(N ** (tau + 1)))  # a permutation


def test_nt_r_has_transients_and_fewer_cycle_states():
    cycles = nt.cycle_lengths(16, 2, "NT-R")
    on_cycles = sum(length * count for length, count in cycles.items())
    assert on_cycles == 3841 < 16 ** 3
    assert len(set(nt.state_map(16, 2, "NT-R").tolist())) < 16 ** 3  # not injective


@pytest.mark.parametrize("variant", nt.VARIANTS)
def test_series_follow_their_rule(variant):
    N, tau = 7, 3
    x = nt.series(N, tau, 41, variant, n_series=5, generator=torch.Generator().manual_seed(0))
    assert x.shape == (5, 41) and x.dtype == torch.long and int(x.min()) >= 0 and int(x.max()) < N
    for t in range(tau + 1, 41):
        nt_rule = (x[:, t - tau] + x[:, t - 1 - tau]) % N
        s_rule = x[:, t - tau - 1:t].sum(1) % N
        expected = {"NT": nt_rule, "NT-S": s_rule, "NT-R": torch.where(x[:, t - tau - 1] == 0, s_rule, nt_rule)}
        assert torch.equal(x[:, t], expected[variant])
    a = nt.series(N, 1, 30, "NT", 3, torch.Generator().manual_seed(1))
    b = nt.series(N, 1, 30, "NT-S", 3, torch.Generator().manual_seed(1))
    assert torch.equal(a, b)  # NT and NT-S coincide for tau = 1


def test_series_period_is_a_cycle_length():
    x = nt.series(16, 2, 300, n_series=20, generator=torch.Generator().manual_seed(3))
    lengths = nt.cycle_lengths(16, 2)
    for row in x:
        period = next(p for p in range(1, 100) if torch.equal(row[100:200], row[100 + p:200 + p]))
        assert period in lengths


def test_windows_and_one_hot():
    x = torch.arange(2 * 11).reshape(2, 11)
    inputs, targets = nt.windows(x, 5, 3)
    assert inputs.shape == (6, 5) and targets.tolist() == [5, 6, 7, 16, 17, 18]
    assert inputs[4].tolist() == [12, 13, 14, 15, 16]
    xb, yb = nt.batch(16, 2, 13, 40, generator=torch.Generator().manual_seed(0))
    assert xb.shape == (40, 13) and yb.shape == (40,)
    assert torch.equal(xb[1:, -1], yb[:-1])  # consecutive predictions of one series
    e = one_hot(torch.tensor([[0, 2], [1, 1]]), 3)
    assert e.shape == (2, 2, 3) and e.sum().item() == 4 and e[0, 1, 2].item() == 1 and e.dtype == torch.float32
    assert torch.equal(one_hot(xb, 16, torch.float64), torch.nn.functional.one_hot(xb, 16).double())
    assert torch.vmap(lambda s: one_hot(s, 16))(xb[:4]).shape == (4, 13, 16)  # runs under vmap (the ensemble)
    assert one_hot(torch.tensor([3]), 3).sum() == 0  # out of range: a zero row (vmap cannot check values)
    with pytest.raises(ValueError, match="n_con"):
        nt.windows(x, 9, 3)
    with pytest.raises(TypeError, match="integer"):
        one_hot(torch.tensor([1.0]), 3)


@pytest.mark.parametrize("kwargs,name", [({"N": 1}, "N"), ({"tau": 0}, "tau"), ({"variant": "NT-X"}, "variant"),
                                         ({"N": 2.0}, "N")])
def test_bad_task_arguments_name_the_argument(kwargs, name):
    args = {"N": 16, "tau": 2, "variant": "NT", **kwargs}
    for fn in (nt.cycle_lengths, nt.mean_cycle_length):
        with pytest.raises(ValueError, match=f"^{name}"):
            fn(args["N"], args["tau"], args["variant"])
    with pytest.raises(ValueError, match=f"^{name}"):
        nt.series(args["N"], args["tau"], 20, args["variant"])


# ------------------------------------------------------------------------------------------------- model


def test_parameter_counts_match_the_paper():
    assert count_parameters(NTModel(NTModelConfig(N=2, n_con=16))) == 802
    big = count_parameters(NTModel(NTModelConfig(N=16, n_con=128)))
    assert 3.5e5 < big < 4.5e5  # paper: "about 4·10^5"
    shared = count_parameters(NTModel(NTModelConfig(N=2, n_con=16, per_position=False)))
    assert shared == 3 * 4 + 2 * 2 * 8 + 2 + 32 * 2 + 2  # one bilayer + the readout
    affine = count_parameters(NTModel(NTModelConfig(N=2, n_con=16, affine=True)))
    assert affine == 802 + 16 * (8 + 2 * 2 * 2)  # + b_1 and two LayerNorms (γ, β) per position


@pytest.mark.parametrize("attention", ["DPA", "EA"])
@pytest.mark.parametrize("per_position,affine", [(True, False), (False, False), (True, True)])
def test_model_shapes_causality_and_rows(attention, per_position, affine):
    torch.manual_seed(0)
    config = NTModelConfig(N=5, n_con=7, attention=attention, per_position=per_position, affine=affine)
    model = NTModel(config).double()
    x = torch.randint(0, 5, (3, 7))
    out, a = model(x, return_attention=True)
    assert out.shape == (3, 5) and a.shape == (3, 7, 7)
    assert torch.allclose(a.sum(-1), torch.ones(3, 7, dtype=torch.float64), atol=1e-12)
    assert (a.triu(1) == 0).all()  # causal: no weight on later tokens
    loss = squared_error(out, torch.tensor([0, 4, 2]))
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    assert 0.0 <= accuracy(out, out.argmax(-1)).item() == 1.0
    with pytest.raises(ValueError, match="N_con=7"):
        model(torch.zeros(3, 6, dtype=torch.long))
    with pytest.raises(ValueError, match="attention"):
        NTModel(NTModelConfig(attention="linear"))


def test_squared_error_is_mse_over_batch_and_outputs():
    out = torch.tensor([[1.0, 0.0, 0.5], [0.0, 0.0, 0.0]])
    assert squared_error(out, torch.tensor([0, 1])).item() == pytest.approx((0.25 + 1.0) / 6)


def test_nt_experiment_tiny_run_learns_and_reports():
    from energylab.experiments import nt as exp

    run = exp.NTRun("N5T1-8", 5, 1, 8, 60)
    cfg = dataclasses.replace(exp.PROFILES["quick"], runs=(run,), seeds=2, eval_every=20, n_eval_series=4,
                              n_final_series=8, attention_maps=4, device="cpu")
    res = exp.run(cfg)
    assert set(res.histories) == {f"N5T1-8/{a}/seed{s}" for a in ("DPA", "EA") for s in (0, 1)}
    h = res.histories["N5T1-8/EA/seed0"]
    assert h.steps["eval/acc"] == [0, 20, 40, 60]
    assert [r["attention"] for r in res.tables["final"]] == ["DPA", "EA"]
    assert len(res.extra["attention"]["N5T1-8/DPA"]) == 8
    assert res.extra["parameters"]["N5T1-8"]["ours"] == count_parameters(exp.make_model(run, "EA"))
    for a in ("DPA", "EA"):
        assert res.final[f"N5T1-8/{a}/acc_mean"] > 0.3  # well above chance (0.2) after 60 epochs
    again = exp.run(cfg)
    assert again.final == res.final  # seeded: identical numbers


def test_mixture_batches_and_per_variant_evaluation():
    from energylab.experiments import nt as exp

    mix = exp.NTRun("mix", 7, 2, 9, 10, variant="mix")
    variants = set()
    for epoch in range(12):
        x, y = exp.epoch_batch(mix, 5, seed=3, epoch=epoch)
        nt_next = (x[:, -2] + x[:, -3]) % 7  # x(t-τ) + x(t-1-τ) with τ = 2
        s_next = x[:, -3:].sum(1) % 7
        variants.add("NT" if torch.equal(y, nt_next) else "NT-S" if torch.equal(y, s_next) else "?")
    assert variants == {"NT", "NT-S"}  # both tasks are drawn, and each batch follows one rule
    torch.manual_seed(0)
    metrics = exp.evaluate(exp.make_model(mix, "EA"), exp.eval_set(mix, 3, 4, seed=0))
    assert set(metrics) == {"acc", "acc_NT", "acc_NT-S", "loss_NT", "loss_NT-S"}
    assert metrics["acc"] == pytest.approx((metrics["acc_NT"] + metrics["acc_NT-S"]) / 2)


def test_ea_is_purely_positional_at_d2_without_layernorm_affine():
    from energylab.experiments import nt as exp

    torch.manual_seed(0)
    run = exp.NTRun("N2T5-16", 2, 5, 16, 1)
    x = torch.randint(0, 2, (256, 16))
    # LN of a one-hot 2-vector is ±(1, −1): every score is ±c_mk, and EA's weights (in z²) forget the sign
    assert exp.weight_variation(exp.make_model(run, "EA"), x) < 1e-6
    assert exp.weight_variation(exp.make_model(run, "DPA"), x) > 1e-3
    model = exp.make_model(run, "EA", affine=True)
    with torch.no_grad():
        model.beta.normal_()  # a LayerNorm shift breaks the sign symmetry
    assert exp.weight_variation(model, x) > 1e-3


def test_runs_override_config_fields_and_share_their_data():
    from energylab.experiments import nt as exp

    base = exp.NTRun("N5T1-8", 5, 1, 8, 20)
    summed = exp.NTRun("N5T1-8+sum", 5, 1, 8, 20, overrides=(("loss_sum", True), ("seeds", 1), ("grad_clip", None)))
    cfg = dataclasses.replace(exp.PROFILES["quick"], runs=(base, summed), seeds=2, eval_every=10, n_eval_series=4,
                              n_final_series=8, attention_maps=4, attentions=("DPA",), device="cpu")
    res = exp.run(cfg)
    assert set(res.histories) == {"N5T1-8/DPA/seed0", "N5T1-8/DPA/seed1", "N5T1-8+sum/DPA/seed0"}
    a, b = res.histories["N5T1-8/DPA/seed0"].curves, res.histories["N5T1-8+sum/DPA/seed0"].curves
    assert a["eval/acc"][0] == b["eval/acc"][0]  # same initial model and the same held-out data
    assert a["eval/loss"][0] == b["eval/loss"][0]  # evaluation always averages over d
    assert b["loss"][0] > 2.5 * a["loss"][0]  # training loss summed over d = 5 outputs (≈ 5x, trained 10 steps)
    rows = {r["task"]: r for r in res.tables["final"]}
    assert (rows["N5T1-8+sum"]["loss_sum"], rows["N5T1-8+sum"]["grad_clip"], rows["N5T1-8+sum"]["seeds"]) == (
        True, None, 1)
    assert exp.PROFILES["medium"].runs[0].name == "N2T5-16" and exp.PROFILES["medium"].runs[0].epochs == 2000


def test_the_full_profile_uses_the_protocol_section_5_8_found():
    """Issue 50: the GPU profile must not keep the averaged, clip-at-1 loss that cannot reproduce the paper."""
    from energylab.experiments import nt

    full = nt.PROFILES["full"]
    assert full.loss_sum is True and full.grad_clip == 10.0 and full.runs == nt.FULL_RUNS
