"""Chapter 12, section 12.4: what the chapter states about in-context denoising, through its own claim function
(energylab.experiments.denoising.claims), on the quick profile's run (seconds per model on one CPU thread)."""
import dataclasses

import pytest

from energylab.experiments import denoising as D

SLOW = pytest.mark.slow  # a run of the quick profile: a minute or two


@pytest.fixture(scope="module")
def quick():
    return D.run(dataclasses.replace(D.PROFILES["quick"], progress=False, device="cpu"))


@SLOW
def test_every_claim_of_section_12_4_holds(quick):
    claims = D.claims(quick, 500)
    assert all(claims.values()), {k: v for k, v in claims.items() if not v}
    assert len(claims) == 6


@SLOW
def test_the_claims_can_fail():
    """The same claims on a run they should not hold for: the trained layers barely trained (one epoch) beat
    nothing, so the claims about them are false."""
    weak = D.run(dataclasses.replace(D.PROFILES["quick"], contexts=(100,), epochs=1, seeds=(0,), n_test=200,
                                     progress=False, device="cpu"))
    claims = D.claims(weak, 100)
    assert not claims["every trained layer beats the nearest token, the noisy query and the prior mean (zero)"]


@SLOW
def test_the_numbers_are_the_papers_setting(quick):
    cfg = quick.config
    assert (cfg["n"], cfg["d"], cfg["radius"], cfg["sigma2"], cfg["contexts"]) == (16, 8, 1.0, 0.1, [500])
    assert (cfg["n_train"], cfg["n_test"], cfg["epochs"], cfg["batch_size"], cfg["lr"]) == (800, 200, 100, 80, 0.01)
    bayes = D.summary(quick, 500, "bayes")["mse"]
    assert 0.35 < bayes < 0.55  # the Bayes-optimal error of this setting, n sigma^2 = 1.6 for the noisy token itself


def test_the_committed_context_sweep_and_its_claims():
    """results/denoising/medium.json: the medium profile run once from a clean commit with pinned numerics; every
    claim chapter 12 makes of it; the one run that did not train, which the chapter names."""
    from energylab.engine.committed import load_committed

    results, provenance = load_committed("denoising", "medium")
    want = D.PROFILES["medium"]
    assert tuple(results.config["contexts"]) == want.contexts and tuple(results.config["seeds"]) == want.seeds
    assert provenance["dirty"] is False and provenance["numerics"] == "pinned"
    claims = D.context_claims(results)
    assert all(claims.values()), {k: v for k, v in claims.items() if not v}
    stuck = [(r["estimator"], r["context"], r["seed"]) for r in results.tables["scores"] if r["seed"] is not None
             and r["mse"] > D.summary(results, r["context"], "nearest token")["mse"]]
    assert stuck == [("trained (softmax)", 1000, 5)]
