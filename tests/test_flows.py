"""Tokens on the sphere: flows, energy, integrators and cluster observables (energylab.flows, .sphere)."""
import math

import pytest
import torch

from energylab.flows import FlowConfig, SphereWeights, energy, preset_weights, simulate, velocity
from energylab.sphere import (
    cluster_labels,
    count_clusters,
    mean_cosine,
    normalize,
    random_tokens,
    tangent_projection,
    time_to_collapse,
)

B, N, D = 2, 7, 5  # distinct primes so a transposed axis cannot pass


def _random_weights(H=3, d_h=2, d=D, seed=1):
    g = torch.Generator().manual_seed(seed)
    return SphereWeights(torch.randn(H, d_h, d, generator=g, dtype=torch.float64),
                         torch.randn(H, d_h, d, generator=g, dtype=torch.float64),
                         torch.randn(H, d, d, generator=g, dtype=torch.float64))


def _loop_velocity(x, w, beta, normalized, causal):
    """dx_i/dt written with explicit sums over h and j, the way the equation reads."""
    Bn, n, d = x.shape
    out = torch.zeros_like(x)
    for b in range(Bn):
        for i in range(n):
            y = torch.zeros(d, dtype=x.dtype)
            for h in range(w.heads):
                js = range(i + 1) if causal else range(n)
                s = torch.stack([torch.exp(beta * (w.Q[h] @ x[b, i]) @ (w.K[h] @ x[b, j])) for j in js])
                z = s.sum() if normalized else n
                y = y + sum(s[m] * (w.V[h] @ x[b, j]) for m, j in enumerate(js)) / z
            out[b, i] = y - (y @ x[b, i]) * x[b, i]
    return out


@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_velocity_matches_explicit_sums(normalized, causal):
    x = random_tokens(B, N, D, seed=3)
    w = _random_weights()
    got = velocity(x, w, beta=1.3, normalized=normalized, causal=causal)
    want = _loop_velocity(x, w, 1.3, normalized, causal)
    assert got.shape == (B, N, D)
    assert (got - want).norm() / want.norm() < 1e-12


def test_velocity_is_tangent():
    x = random_tokens(B, N, D, seed=4)
    v = velocity(x, _random_weights(), beta=2.0)
    assert (x * v).sum(-1).abs().max() < 1e-13


@pytest.mark.parametrize("preset,heads", [("identity", 1), ("identity", 5), ("symmetric", 1), ("symmetric", 5)])
def test_usa_is_gradient_ascent_of_energy(preset, heads):
    """USA: dx_i/dt = n P_{x_i} grad_{x_i} E_beta whenever V_h = Q_h^T K_h (Geshkovski et al. 2023, Sec. 3)."""
    x = random_tokens(B, N, D, seed=5).requires_grad_(True)
    w = preset_weights(preset, D, heads=heads, seed=2)
    assert torch.allclose(w.V, w.Q.transpose(1, 2) @ w.K, atol=1e-15)
    (grad,) = torch.autograd.grad(energy(x, 2.3, w).sum(), x)
    want = N * tangent_projection(x.detach(), grad)
    got = velocity(x.detach(), w, beta=2.3, normalized=False)
    assert (got - want).norm() / want.norm() < 1e-10


def test_energy_hand_values_and_default_weights():
    beta = 1.7
    same = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64).expand(N, 3)
    assert abs(float(energy(same, beta)) - math.exp(beta) / (2 * beta)) < 1e-14
    pair = torch.tensor([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]], dtype=torch.float64)
    want = (2 * math.exp(beta) + 2 * math.exp(-beta)) / (2 * beta * 4)
    assert abs(float(energy(pair, beta)) - want) < 1e-14
    x = random_tokens(B, N, D, seed=6)
    assert torch.allclose(energy(x, beta), energy(x, beta, preset_weights("identity", D)), rtol=1e-14)
    assert energy(torch.stack([x, x]), beta).shape == (2, B)


@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("method", ["euler", "rk4"])
def test_energy_increases_for_identity_weights(normalized, method):
    x0 = random_tokens(3, 11, 3, seed=7)
    cfg = FlowConfig(beta=1.5, normalized=normalized, step=0.05, steps=120, method=method)
    traj = simulate(x0, preset_weights("identity", 3), cfg)
    e = energy(traj.x, cfg.beta)  # (T, B)
    assert (e[1:] - e[:-1]).min() > -1e-13
    assert (e[-1] - e[0]).min() > 1e-3  # it really moved


@pytest.mark.parametrize("method", ["euler", "rk4"])
def test_tokens_stay_on_sphere(method):
    x0 = random_tokens(B, N, D, seed=8)
    traj = simulate(x0, _random_weights(), FlowConfig(beta=4.0, step=0.05, steps=1000, method=method,
                                                      save_every=100))
    assert traj.x.shape == (11, B, N, D) and traj.times[-1] == pytest.approx(50.0)
    assert (torch.linalg.vector_norm(traj.x, dim=-1) - 1).abs().max() < 1e-12


def test_rk4_is_fourth_order_and_euler_first():
    x0 = random_tokens(1, N, 3, seed=9)
    w = _random_weights(H=1, d_h=3, d=3)

    def end(method, h):
        return simulate(x0, w, FlowConfig(beta=1.0, step=h, steps=round(1.0 / h), method=method)).x[-1]

    ref = end("rk4", 1 / 640)
    for method, order in (("euler", 1), ("rk4", 4)):
        ratio = (end(method, 1 / 10) - ref).norm() / (end(method, 1 / 20) - ref).norm()
        assert abs(math.log2(ratio) - order) < 0.35


def test_hemisphere_start_collapses_to_one_cluster():
    x0 = random_tokens(2, 13, 3, seed=10, hemisphere=True)
    for normalized in (True, False):
        traj = simulate(x0, preset_weights("identity", 3), FlowConfig(beta=1.0, normalized=normalized, step=0.1,
                                                                       steps=400, save_every=10))
        assert count_clusters(traj.x[0], 0.1).min() > 1
        assert count_clusters(traj.x[-1], 0.1).tolist() == [1, 1]
        assert mean_cosine(traj.x[-1]).min() > 1 - 1e-6
        t = time_to_collapse(traj.x, traj.times, 0.1)
        assert torch.isfinite(t).all() and (t > 0).all()


def test_cluster_counting_hand_made():
    e = torch.eye(3, dtype=torch.float64)
    jitter = torch.tensor([[0.0, 0.01, 0.0], [0.0, 0.0, 0.01], [0.0, 0.0, 0.0]], dtype=torch.float64)
    three = normalize(torch.cat([e[0] + jitter, e[1] + jitter.roll(1, -1), e[2] + jitter.roll(2, -1)]))
    one = normalize(e[0] + torch.cat([jitter, 2 * jitter, 3 * jitter]))
    antipodal = torch.stack([e[1], -e[1], e[1], -e[1], e[1]])
    assert count_clusters(three).item() == 3
    assert count_clusters(one).item() == 1
    assert count_clusters(antipodal).item() == 2
    assert count_clusters(e).item() == 3
    assert count_clusters(e, threshold=1.5).item() == 1  # the three axes are sqrt(2) apart
    assert count_clusters(torch.stack([three, one])).tolist() == [3, 1]  # batched
    assert cluster_labels(antipodal).tolist() == [0, 1, 0, 1, 0]
    # a chain of points 0.05 apart is one cluster by single linkage, although its ends are far apart
    ang = torch.arange(20, dtype=torch.float64) * 0.05
    chain = torch.stack([ang.cos(), ang.sin(), torch.zeros_like(ang)], -1)
    assert count_clusters(chain).item() == 1
    assert count_clusters(chain, threshold=0.04).item() == 20


def test_mean_cosine_hand_values():
    e = torch.eye(3, dtype=torch.float64)
    assert float(mean_cosine(e)) == pytest.approx(0.0, abs=1e-15)
    assert float(mean_cosine(torch.stack([e[0], e[0], e[0]]))) == pytest.approx(1.0, abs=1e-15)
    assert float(mean_cosine(torch.stack([e[0], -e[0]]))) == pytest.approx(-1.0, abs=1e-15)


def test_time_to_collapse_inf_when_never():
    x = torch.eye(3, dtype=torch.float64).expand(4, 1, 3, 3)
    assert time_to_collapse(x, torch.arange(4.0)).tolist() == [math.inf]


@pytest.mark.parametrize("normalized", [True, False])
def test_causal_token_i_ignores_later_tokens(normalized):
    x = random_tokens(B, N, D, seed=11)
    w = _random_weights()
    y = x.clone()
    y[:, 4:] = random_tokens(B, N - 4, D, seed=12)
    v1 = velocity(x, w, 1.0, normalized, causal=True)
    v2 = velocity(y, w, 1.0, normalized, causal=True)
    assert torch.equal(v1[:, :4], v2[:, :4])
    assert (v1[:, 4:] - v2[:, 4:]).abs().max() > 1e-3
    # the first token only sees itself: under SA with V = I it does not move
    v = velocity(x, preset_weights("identity", D), 1.0, normalized=True, causal=True)
    assert v[:, 0].abs().max() < 1e-15


def test_multi_head_shapes_and_sum_over_heads():
    x = random_tokens(B, N, D, seed=13)
    w = _random_weights(H=3, d_h=2)
    heads = [SphereWeights(w.Q[h:h + 1], w.K[h:h + 1], w.V[h:h + 1]) for h in range(3)]
    total = sum(velocity(x, wh, 0.7) for wh in heads)
    assert velocity(x, w, 0.7).shape == (B, N, D)
    assert (velocity(x, w, 0.7) - total).abs().max() < 1e-14
    for preset in ("identity", "symmetric", "random", "antisymmetric"):
        p = preset_weights(preset, 6, heads=3)
        assert p.Q.shape == (3, 2, 6) and p.K.shape == (3, 2, 6) and p.V.shape == (3, 6, 6)


def test_antisymmetric_preset_keeps_rotating():
    x0 = random_tokens(1, 11, 3, seed=14, hemisphere=True)
    cfg = FlowConfig(beta=1.0, step=0.1, steps=300, save_every=300)
    still = simulate(x0, preset_weights("identity", 3), cfg).x[-1]
    spin = simulate(x0, preset_weights("antisymmetric", 3, seed=1), cfg).x[-1]
    speed = lambda x, w: velocity(x, w, 1.0).norm(dim=-1).mean()  # noqa: E731
    assert speed(still, preset_weights("identity", 3)) < 1e-6
    assert speed(spin, preset_weights("antisymmetric", 3, seed=1)) > 0.1


def test_deterministic_by_seed():
    a = simulate(random_tokens(B, N, D, seed=15), _random_weights(), FlowConfig(steps=20))
    b = simulate(random_tokens(B, N, D, seed=15), _random_weights(), FlowConfig(steps=20))
    c = random_tokens(B, N, D, seed=16)
    assert torch.equal(a.x, b.x) and not torch.equal(a.x[0], c)
    assert torch.equal(preset_weights("random", D, seed=3).V, preset_weights("random", D, seed=3).V)


def test_bad_inputs_name_the_argument():
    x = random_tokens(B, N, D)
    w = _random_weights()
    cases = [
        (lambda: velocity(x, w, beta=-1.0), "beta"),
        (lambda: velocity(x, w, beta=float("nan")), "beta"),
        (lambda: energy(x, 0.0), "beta"),
        (lambda: velocity(x[0], w, 1.0), "x"),
        (lambda: velocity(x, preset_weights("identity", 3), 1.0), "weights"),
        (lambda: simulate(2 * x, w, FlowConfig()), "x0"),
        (lambda: simulate(x, w, FlowConfig(step=0.0)), "step"),
        (lambda: simulate(x, w, FlowConfig(steps=-1)), "steps"),
        (lambda: simulate(x, w, FlowConfig(save_every=0)), "save_every"),
        (lambda: simulate(x, w, FlowConfig(method="midpoint")), "method"),
        (lambda: SphereWeights(w.Q, w.K[:, :1], w.V), "K"),
        (lambda: SphereWeights(w.Q, w.K, w.V[:, :2]), "V"),
        (lambda: preset_weights("spin", D), "name"),
        (lambda: preset_weights("identity", D, heads=2), "heads"),
        (lambda: random_tokens(0, N, D), "batch"),
        (lambda: count_clusters(x, threshold=-0.1), "threshold"),
        (lambda: mean_cosine(x[:, :1]), "x"),
    ]
    for fn, name in cases:
        with pytest.raises(ValueError, match=name):
            fn()
    with pytest.raises(TypeError, match="weights"):
        velocity(x, (w.Q, w.K, w.V), 1.0)
    with pytest.raises(TypeError, match="x"):
        velocity(x.long(), w, 1.0)


def test_sphere_figure_frames_size_and_errors():
    from energylab.flows import simulate_preset
    from energylab.viz.sphere import figure_bytes, sphere_figure

    traj = simulate_preset(n=64, beta=4.0, steps=399, step=0.1, seed=0)  # 400 states -> 200 frames
    fig = sphere_figure(traj.x[:, 0], traj.times)
    assert len(fig.frames) == 200 and len(fig.layout.sliders[0].steps) == 200
    assert len(fig.frames[7].data[1].x) == 64 and len(fig.frames[7].data[0].x) == 2 * 64  # tokens, ghosts
    assert figure_bytes(fig) <= 1_000_000  # the page budget of one animation
    x5 = random_tokens(1, N, D).expand(3, N, D)  # d = 5 goes through a 3-D projection
    assert len(sphere_figure(x5).data[2].x) == N
    with pytest.raises(ValueError, match="t"):
        sphere_figure(traj.x[:, 0], traj.times[:-1])
    with pytest.raises(ValueError, match="basis"):
        sphere_figure(x5, basis=torch.eye(D, dtype=torch.float64))
    with pytest.raises(ValueError, match="trail"):
        sphere_figure(traj.x[:, 0], trail=-1)


def test_explorer_draws_the_validated_figure(monkeypatch):
    """The live explorer shows sphere_figure's dict unvalidated (fast); validated, it is the same figure."""
    import plotly.graph_objects as go
    import plotly.io

    from energylab.flows import simulate_preset
    from energylab.viz.sphere import explorer_figure, sphere_explorer, sphere_figure

    params = {"n": 12, "beta": 2.0, "preset": "random", "heads": 3, "step": 0.1, "steps": 30, "normalized": True,
              "causal": False, "seed": 4}
    d = explorer_figure(params, max_frames=10)
    traj = simulate_preset(**params)
    want = sphere_figure(traj.x[:, 0], traj.times, max_frames=10, title="random, β = 2")
    assert go.Figure(d).to_dict()["frames"] == want.to_dict()["frames"]
    assert go.Figure(d).to_dict()["data"] == want.to_dict()["data"]
    shown = []
    monkeypatch.setattr(plotly.io, "show", lambda fig, validate=True: shown.append((fig, validate)))
    sphere_explorer(draw=True, max_frames=10)
    assert len(shown) == 1 and shown[0][1] is False and len(shown[0][0]["frames"]) == 10
