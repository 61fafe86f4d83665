"""Chapter 3, sections 3.6 and 3.8: storage capacity of random patterns beside Ramsauer et al.'s Theorem 3, and the
three regimes of a trained looped Transformer's heads. The claims the chapter prints are computed here by the same
functions, on the chapter's seed and on another one."""
import math

import pytest
import torch

from energylab.claims import hopfield as hopfield_claims
from energylab.experiments import hopfield_capacity as hc
from energylab.experiments import hopfield_heads as hh


# ----------------------------------------------------------------------------- capacity and Theorem 3
def test_lambert_w0_inverts_w_exp_w():
    assert hc.lambert_w0(0.0) == 0.0 and abs(hc.lambert_w0(math.e) - 1.0) < 1e-14
    for x in (1e-6, 0.3, 1.0, 3.57, 50.0, 1e6):
        w = hc.lambert_w0(x)
        assert abs(w * math.exp(w) - x) <= 1e-12 * x
    with pytest.raises(ValueError):
        hc.lambert_w0(-0.1)


def test_theorem3_reproduces_the_papers_constants_and_its_condition_is_a_bound_of_two():
    # the two settings Ramsauer et al. evaluate: c >= 3.1546 (K = 3, d = 20) and c >= 1.3718 (K = 1, d = 75)
    t = hc.theorem3(20, 1.0, 3.0, 0.001)
    assert abs(t["c"] - 3.1546) < 1e-4 and t["holds"]
    t = hc.theorem3(75, 1.0, 1.0, 0.001)
    assert 1.3718 <= t["c"] < 1.3720 and t["holds"]
    # the condition c >= (2/sqrt(p))^(4/(d-1)) is the bound sqrt(p) c^((d-1)/4) >= 2
    for d in range(3, 120):
        for K in (1.0, 2.0, 3.0):
            t = hc.theorem3(d, 1.0, K, 0.01)
            assert t["holds"] == (t["bound"] >= 2 - 1e-9)
    # chapter 3.6: at delta = 0.01 the condition first holds at d = 46 (K = 1) and d = 13 (K = 3), with ~2 patterns
    first = {K: next(d for d in range(2, 200) if hc.theorem3(d, 1.0, K, 0.01)["holds"]) for K in (1.0, 3.0)}
    assert first == {1.0: 46, 3.0: 13}
    assert all(2 <= hc.theorem3(d, 1.0, K, 0.01)["bound"] < 2.2 for K, d in first.items())


def test_grid_and_failures_at_the_extremes():
    g = hc.grid(4)
    assert [next(g) for _ in range(8)] == [2, 3, 4, 5, 6, 7, 8, 10]
    cfg = hc.CapacityConfig(queries=200)
    far = hc.CapacityConfig(queries=200, beta=50.0)  # very sharp softmax: one step lands on the pattern
    assert hc.failures(16, 50, far, torch.Generator().manual_seed(0)) == (0, 200)
    flat = hc.CapacityConfig(queries=200, beta=1e-4)  # flat softmax: every update lands on the mean
    assert hc.failures(16, 50, flat, torch.Generator().manual_seed(0)) == (200, 200)
    f, n = hc.failures(4, 3, cfg, torch.Generator().manual_seed(1))
    assert n == 67 * 3 and 0 <= f <= n


@pytest.fixture(scope="module", params=[0, 1])
def capacity_run(request):
    return hc.capacity(hc.CapacityConfig(seed=request.param))


def test_capacity_claims_hold(capacity_run):
    claims = hopfield_claims.capacity_claims(capacity_run, p=0.01)
    assert all(claims.values()), [k for k, v in claims.items() if not v]
    rows = capacity_run["rows"]
    assert [r["d"] for r in rows] == [4, 6, 8, 10, 12, 14, 16]
    for r in rows:  # the capacity is the last P before the first rate above the allowed one
        k = r["P"].index(r["capacity"]) if r["capacity"] else -1
        assert all(rate <= 0.01 for rate in r["rate"][:k + 1]) and r["rate"][k + 1] > 0.01
        assert len(r["P"]) == k + 2 + 3  # three grid points measured past the first failing P


def test_capacity_numbers_of_the_chapter():
    """The table of section 3.6 (seed 0): P* per d, and the rates quoted in its reading."""
    res = hc.capacity()
    assert [r["capacity"] for r in res["rows"]] == [0, 3, 23, 128, 609, 2048, 8192]
    assert abs(hc.growth_per_dimension(res) - 2.07) < 0.005
    assert abs(res["rows"][0]["rate"][0] - 0.1245) < 5e-5  # d = 4: two patterns fail 12% of the time
    nxt = [r["rate"][r["P"].index(r["capacity"]) + 1] for r in res["rows"][1:]]
    assert 0.014 <= min(nxt) and max(nxt) < 0.087


def test_only_beta_k_squared_matters():
    """Exercise ex-beta-radius: beta = 2 at K = 1 and beta = 1 at K = sqrt(2) give the same counts (same seed)."""
    a = hc.capacity(hc.CapacityConfig(dims=(4, 6, 8), beta=2.0, K=1.0, queries=500))
    b = hc.capacity(hc.CapacityConfig(dims=(4, 6, 8), beta=1.0, K=math.sqrt(2), queries=500))
    assert [r["failed"] for r in a["rows"]] == [r["failed"] for r in b["rows"]]
    base = hc.capacity(hc.CapacityConfig(dims=(4, 6, 8), queries=500))["rows"]
    assert all(r["capacity"] > b["capacity"] for r, b in zip(a["rows"], base))  # a colder softmax stores more


# ----------------------------------------------------------------------------- the head regimes
def test_measures_and_thresholds():
    N = 16
    uniform, one = torch.full((N,), 1 / N), torch.eye(N)[3]
    assert float(hh.participation(uniform)) == pytest.approx(N) and float(hh.participation(one)) == 1.0
    assert int(hh.mass_count(uniform)) == 15 and int(hh.mass_count(one)) == 1  # ceil(0.9 * 16) = 15
    peers8 = torch.zeros(N)
    peers8[:8] = 1 / 8
    assert float(hh.participation(peers8)) == pytest.approx(8) and int(hh.mass_count(peers8)) == 8
    assert [hh.regime(r, N) for r in (8.01, 8.0, 2.01, 2.0, 1.0)] == ["global", "metastable", "metastable",
                                                                      "single", "single"]
    assert [hh.paper_class(k, N) for k in (9, 8, 3, 2, 1)] == ["I", "II", "II", "III", "III"]
    assert hh.paper_class(2, 81) == "IV" and hh.paper_class(19, 81) == "II"  # exercise ex-peer-head at 9x9
    for size, peers in ((4, 8), (6, 13), (9, 21)):
        mask = hh.peer_mask(size)
        assert (mask.sum(1) == peers).all() and (mask == mask.T).all() and mask.diagonal().all()


def test_attention_weights_are_what_the_block_applies():
    torch.manual_seed(0)
    from energylab.layers.block import TransformerBlock

    block = TransformerBlock(16, 4)
    h = torch.randn(3, 9, 16)
    p = block.attention_weights(h)  # (B, H, N, N)
    assert p.shape == (3, 4, 9, 9) and torch.allclose(p.sum(-1), torch.ones(3, 4, 9))
    v = block.attention._qkv(block.norm1(h))[2]
    y = block.attention.out((p @ v).transpose(1, 2).reshape(3, 9, 16))
    assert torch.allclose(y, block.attention(block.norm1(h)), atol=1e-6)


@pytest.fixture(scope="module", params=[0, 1])
def heads_run(request):
    seed = request.param
    model, test = hh.train_looped(hh.HEADS, seed=seed)
    init, _ = hh.train_looped(hh.HEADS, seed=seed, trained=False)
    boards = test.tokens[:200]
    return seed, hh.head_table(model, boards), hh.head_table(init, boards), hh.board_accuracy(model, test)


def test_head_claims_hold(heads_run):
    seed, trained, untrained, solved = heads_run
    claims = hopfield_claims.head_claims(trained, untrained, solved)
    assert all(claims.values()), (seed, [k for k, v in claims.items() if not v])
    assert len(trained) == hh.HEADS.iterations * hh.HEADS.heads
    assert {row["t"] for row in trained} == {1, 2, 3, 4}


def test_head_claims_fail_on_the_opposite_picture(heads_run):
    """The claims are not vacuous: swapping the trained and the untrained tables breaks them."""
    _, trained, untrained, solved = heads_run
    claims = hopfield_claims.head_claims(untrained, trained, solved)
    assert not claims["as initialised, every head averages globally (median r > N/2) at every iteration"]
    assert not claims["trained, at t = 1 every head is metastable (2 < median r <= N/2)"]


def test_figures(capacity_run, heads_run):
    from energylab.viz import hopfield as hopfield_viz

    fig = hopfield_viz.capacity_figure(capacity_run, hc.growth_per_dimension(capacity_run))
    assert len(fig.data) == len(capacity_run["rows"]) + 4
    assert list(fig.data[len(capacity_run["rows"]) + 1].y) == [r["capacity"] for r in capacity_run["rows"][1:]]
    _, trained, untrained, _ = heads_run
    fig = hopfield_viz.head_regimes_figure({"as initialised": untrained, "trained": trained}, 16, hh.SINGLE)
    assert len(fig.data) == 2 and len(fig.data[1].x) == len(trained)
    assert list(fig.data[1].median) == [round(row["quantiles"]["q50"], 4) for row in trained]
