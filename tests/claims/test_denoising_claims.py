"""Chapter 12, section 12.4: what the chapter states about in-context denoising, through its own claim functions
(energylab.claims.denoising.claims and context_claims)."""
import dataclasses

from energylab.claims import denoising as denoising_claims
from energylab.experiments import denoising as D


def test_the_quick_profile_is_the_papers_setting():
    """Section 12.4's claims are printed by the chapter's quick run, whose outputs nbval compares on every test run
    (so they are not recomputed here); this pins the setting they are made at."""
    cfg = D.PROFILES["quick"]
    assert (cfg.n, cfg.d, cfg.radius, cfg.sigma2, cfg.contexts) == (16, 8, 1.0, 0.1, (500,))
    assert (cfg.n_train, cfg.n_test, cfg.epochs, cfg.batch_size, cfg.lr) == (800, 200, 100, 80, 0.01)


def test_the_claims_can_fail():
    """The same claims on a run they should not hold for: layers trained for one epoch beat nothing, so the claim
    about the trained layers is false there."""
    weak = D.run(dataclasses.replace(D.PROFILES["quick"], contexts=(100,), epochs=1, seeds=(0,), n_test=200,
                                     progress=False, device="cpu"))
    claims = denoising_claims.claims(weak, 100)
    assert not claims["every trained layer beats the nearest token, the noisy query and the prior mean (zero)"]
    assert claims["it beats exact retrieval of the nearest context token"]  # the untrained parts still hold


def test_the_committed_context_sweep_and_its_claims():
    """results/denoising/medium.json: the medium profile run once from a clean commit with pinned numerics; every
    claim chapter 12 makes of it; the one run that did not train, which the chapter names."""
    from energylab.engine.committed import load_committed

    results, provenance = load_committed("denoising", "medium")
    want = D.PROFILES["medium"]
    assert tuple(results.config["contexts"]) == want.contexts and tuple(results.config["seeds"]) == want.seeds
    assert provenance["dirty"] is False and provenance["numerics"] == "pinned"
    claims = denoising_claims.context_claims(results)
    assert all(claims.values()), {k: v for k, v in claims.items() if not v}
    stuck = [(r["estimator"], r["context"], r["seed"]) for r in results.tables["scores"] if r["seed"] is not None
             and r["mse"] > D.summary(results, r["context"], "nearest token")["mse"]]
    assert stuck == [("trained (softmax)", 1000, 5)]
