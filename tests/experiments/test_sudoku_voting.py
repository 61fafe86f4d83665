"""Test-time voting (energylab.experiments.sudoku_voting): K = 1 is the plain model, majority of identical runs is
the plain prediction, energy voting takes the argmin, budgets are counted right."""
import pytest
import torch
from torch import nn

from energylab import pretrained
from energylab.experiments import sudoku_voting as V
from energylab.models.looped import LoopedConfig, LoopedModel
from energylab.tasks import sudoku_harness as harness
from energylab.tasks.sudoku import SudokuDataset


@pytest.fixture(scope="module")
def boards():
    p, s = pretrained.boards("4x4-ood")
    return SudokuDataset(p[:120], s[:120])


@pytest.mark.parametrize("name", ["sudoku4-transformer", "sudoku4-akorn"])
def test_k1_is_the_plain_model_and_budgets_are_counted(boards, name):
    model = pretrained.load(name)
    rows = V.voting_table(model, boards, ks=(1, 2), chunk=50)
    plain = harness.test_time(model, boards, (8, 16))
    k1 = [r for r in rows if r["K"] == 1]
    assert {r["method"] for r in k1} == set(V.METHODS) - ({"energy"} if name == "sudoku4-transformer" else set())
    for r in k1:  # every method of one run is that run: exactly the plain accuracy at T
        assert r["board"] == plain[8]["board"] and r["cell"] in (plain[8]["cell"], None)
        assert r["work"] == 8
    k2 = {r["method"]: r for r in rows if r["K"] == 2}
    assert k2["plain@T"]["work"] == 8 and all(r["work"] == 16 for m, r in k2.items() if m != "plain@T")
    assert (k2["plain@KT"]["board"], k2["plain@KT"]["cell"]) == (plain[16]["board"], plain[16]["cell"])
    assert k2["plain@T"]["board"] == plain[8]["board"]
    assert k2["any"]["board"] >= max(k2[m]["board"] for m in ("confidence", "majority", "plain@T"))


def test_identical_runs_vote_for_the_plain_prediction(boards):
    model = pretrained.load("sudoku4-itrsa")
    tokens, mask = boards.tokens[:40], boards.mask[:40]
    logits, energy = V.vote_runs(model, tokens, 5, 8, sigma=0.0)
    assert energy is None  # ItrSA has no energy
    plain = model(tokens, 8).argmax(-1)
    votes = V.combine(logits, mask)
    assert torch.equal(votes["majority"], plain) and torch.equal(votes["confidence"], plain)
    same = V.combine(model(tokens, 8)[None].expand(7, -1, -1, -1), mask)  # K copies of one run
    assert torch.equal(same["majority"], plain)
    rows = V.voting_table(model, boards, ks=(4,), sigma=0.0)
    by = {r["method"]: r["board"] for r in rows}
    assert by["majority"] == by["confidence"] == by["plain@T"] == by["any"]


def test_majority_is_per_cell_and_ties_go_to_run_zero():
    logits = torch.zeros(3, 1, 2, 4)
    for k, digits in enumerate([(0, 1), (2, 3), (2, 1)]):  # run k predicts digits[j] at cell j
        for j, d in enumerate(digits):
            logits[k, 0, j, d] = 1.0
    assert V.combine(logits, torch.ones(1, 2, dtype=torch.bool))["majority"].tolist() == [[2, 1]]
    two = logits[:2]  # a 1-1 tie at both cells: run 0's digits
    assert V.combine(two, torch.ones(1, 2, dtype=torch.bool))["majority"].tolist() == [[0, 1]]


class StubLayer(nn.Module):
    """x' = x / 2 + c / 2; energy = the sum of the state's entries (B,)."""

    def forward(self, x, c):
        return 0.5 * x + 0.5 * c

    def energy(self, x, c=None):
        return x.sum((1, 2))


def test_energy_voting_picks_the_lowest_energy_run():
    torch.manual_seed(0)
    model = LoopedModel(LoopedConfig(size=4, dim=8, heads=2))
    model.layer = StubLayer()
    assert V.has_energy(model)
    tokens = torch.randint(0, 5, (6, 16))
    logits, energy = V.vote_runs(model, tokens, 5, 3, sigma=2.0, generator=torch.Generator().manual_seed(1))
    assert energy.shape == (5, 6) and len(set(energy[:, 0].tolist())) == 5  # the noise makes every run differ
    starts = V.perturbed_starts(model.inputs(tokens), 5, 2.0, torch.Generator().manual_seed(1))
    c = model.inputs(tokens)
    x = starts
    for _ in range(3):
        x = 0.5 * x + 0.5 * c
    assert torch.allclose(energy, x.sum((2, 3)))  # the stub's energy of each run's final state
    assert torch.equal(starts[0], c)  # run 0 starts at x_0 = c
    picked = V.combine(logits, tokens == 0, energy)["energy"]
    lowest = energy.argmin(0)
    assert torch.equal(picked, logits.argmax(-1)[lowest, torch.arange(6)])
    assert torch.equal(V.pick_lowest(torch.tensor([[3.0, 1.0], [2.0, 5.0], [-1.0, 5.0]])), torch.tensor([2, 0]))


def test_a_start_is_where_the_loop_begins():
    torch.manual_seed(0)
    model = LoopedModel(LoopedConfig(size=4, dim=8, heads=2))
    tokens = torch.randint(0, 5, (3, 16))
    c = model.inputs(tokens)
    assert torch.equal(model(tokens, 4, start=c), model(tokens, 4))
    assert not torch.allclose(model(tokens, 4, start=c + 1.0), model(tokens, 4))
    with pytest.raises(ValueError, match="start must be a tensor of the states' shape"):
        model(tokens, 4, start=c[:2])
    a = V.perturbed_starts(c, 3, 0.1, torch.Generator().manual_seed(5))
    b = V.perturbed_starts(c, 3, 0.1, torch.Generator().manual_seed(5))
    assert torch.equal(a, b) and not torch.equal(a[1], a[2])
    rms = c.pow(2).mean(-1, keepdim=True).sqrt()
    assert 0.08 < float(((a[1] - c) / rms).detach().std()) < 0.12  # noise of σ = 0.1 relative to the tokens' rms


def test_voting_search_at_several_noises_keeps_them_apart():
    """The noise sweep on the boards that need search: one block of rows per σ, σ in its final keys; one σ keeps
    the committed file's keys (no σ in them)."""
    from energylab.experiments import sudoku_voting as V

    two = V.voting_search(n_boards=2, settings=((2, (2,)),), sigmas=(0.3, 1.0))
    assert two.config["sigmas"] == [0.3, 1.0] and "sigma" not in two.config
    assert sorted({r["sigma"] for r in two.tables["voting"]}) == [0.3, 1.0]
    assert "sigma=1.0/T2/majority@K2/board" in two.final and "sigma=0.3/T2/plain@T@K2/board" in two.final
    one = V.voting_search(n_boards=2, settings=((2, (2,)),))
    assert one.config["sigma"] == V.SIGMA and "T2/majority@K2/board" in one.final
    # the plain run does not depend on the noise
    plain = [r["board"] for r in two.tables["voting"] if r["method"] == "plain@T"]
    assert plain[0] == plain[1]
