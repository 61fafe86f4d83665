"""Generalised symmetric self-attention (paper 003, Props. 4.1/4.2): exact gradients, energies that never increase
along the softmax flows, the failed reconstruction, the discrete flow's negative exponent (float64)."""
import torch

from energylab import catalog
from energylab.forms.recurrent import (
    energy_rate,
    orthogonal_head_maps,
    sa_flow,
    sample_generalised_symmetric,
    sample_multihead_symmetric,
)
from energylab.jacobians import lyapunov_spectrum
from energylab.sphere import normalize, random_tokens

D = torch.float64


def test_generalised_symmetric_forms_are_exact_gradients():
    assert catalog.verify("generalised_symmetric_sa") < 1e-10
    assert catalog.verify("multihead_symmetric_sa", dim=6) < 1e-10
    assert catalog.verify("multihead_symmetric_sa", dim=8, n_tokens=4) < 1e-10


def test_energy_never_increases_along_the_softmax_flows():
    """dE/dt ≤ 0 on 4,000 random states for each of 5 random weight draws, both propositions (float64)."""
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        _, p = sample_generalised_symmetric(6, 4, generator=g)
        x = random_tokens(4000, 6, 4, seed=int(torch.randint(0, 10**6, (), generator=g)))
        A = p["W_Q"] @ p["W_K"].T
        assert energy_rate(x, A, p["W_V"], p["beta"], project=True).max() <= 1e-12
        _, p = sample_multihead_symmetric(6, 6, generator=g)
        maps = orthogonal_head_maps(p["U"], p["Lam"])
        x = 2 * torch.randn(4000, 6, 6, generator=g, dtype=D)
        assert energy_rate(x, maps, maps, p["beta"], project=False).max() <= 1e-12


def test_the_notes_reconstruction_of_prop41_fails_somewhere():
    """W_V = (A + Aᵀ)/2 with a non-symmetric A in the exponent: dE/dt > 0 on some states (n = 6, d = 4, β = 1)."""
    g = torch.Generator().manual_seed(0)
    positive = 0
    for _ in range(10):
        A = torch.randn(4, 4, generator=g, dtype=D)
        x = random_tokens(2000, 6, 4, seed=int(torch.randint(0, 10**6, (), generator=g)))
        positive += int((energy_rate(x, A, (A + A.T) / 2, 1.0) > 1e-9).sum())
    assert positive > 0


def test_discrete_symmetric_sa_has_a_negative_max_exponent():
    g = torch.Generator().manual_seed(0)
    x0, p = sample_generalised_symmetric(6, 4, generator=g)
    A = p["W_Q"] @ p["W_K"].T

    def step(x):
        return normalize(x + 0.5 * sa_flow(x, A, p["W_V"], p["beta"]))

    top = lyapunov_spectrum(step, x0, 100, k=3, warmup=50)
    assert top[0] < -1e-3
