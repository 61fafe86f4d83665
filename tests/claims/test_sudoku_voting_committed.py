"""What chapter 9 states about test-time voting (results/sudoku/voting-4x4.json, issue 51), through the functions the
chapter calls (sudoku_voting.voting_rows, energylab.claims.sudoku.voting_claims)."""
from energylab.claims.sudoku import VOTE_MARGIN, voting_claims
from energylab.engine.committed import load_committed
from energylab.experiments.sudoku_voting import voting_markdown, voting_rows


def test_committed_voting_claims():
    results, provenance = load_committed("sudoku", "voting-4x4")
    assert provenance["numerics"] == "pinned"
    ood = voting_rows(results, "4x4-ood", 0.1, 16)
    assert set(ood) == {"sudoku4-transformer", "sudoku4-itrsa", "sudoku4-akorn", "sudoku4-hyperset"}
    claims = voting_claims(ood)
    # the Kuramoto layer: energy voting picks worse runs, confidence voting is its best use of 16x the work
    assert "sudoku4-akorn" in claims["energy_hurts"] and "sudoku4-akorn" in claims["confidence_wins"]
    # the layers that keep improving past T: one long run beats every vote
    assert "sudoku4-itrsa" in claims["long_run_wins"]
    t = ood["sudoku4-transformer"]
    assert t["plain@KT"] > max(t["confidence"], t["majority"])  # ahead, by about the margin (the chapter says so)
    # the oracle bound is above every selection rule for every model
    assert all(r["any"] >= max(v for k, v in r.items() if k not in ("any", "plain@KT")) for r in ood.values())
    table = voting_markdown(results, "4x4-ood", 0.1, 16)
    assert table.count("\n") == 1 + len(ood) and "| – |" in table  # no energy for the Transformer and ItrSA


def test_claims_need_the_margin():
    rows = {"m": {"plain@T": 0.5, "plain@KT": 0.6, "energy": 0.5 - VOTE_MARGIN / 2, "confidence": 0.6 - VOTE_MARGIN / 2,
                  "majority": 0.4, "any": 0.9}}
    assert voting_claims(rows) == {"long_run_wins": [], "energy_hurts": [], "confidence_wins": []}
    rows["m"].update(energy=0.3, confidence=0.7)
    assert voting_claims(rows) == {"long_run_wins": [], "energy_hurts": ["m"], "confidence_wins": ["m"]}
