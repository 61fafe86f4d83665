"""The chapters' claims, in one place: one module per topic.

A claim in this book is a statement about a run, written as a function that returns ``{sentence: bool}`` from
committed results (``results/``, read by :func:`energylab.engine.committed.load_committed`) or from a live run of a
chapter's cell. The chapter prints each sentence beside its truth value; a test in ``tests/claims`` asserts the same
function on the same numbers, with a margin that a rerun could fail (and shows, on altered numbers, that it can).
The margins are part of each claim: a sentence is True only past them.

- ``attractor``: chapter 7 (the bare attractor model against the mean digit);
- ``lis``: chapter 4 (Newton attention on the longest increasing subsequence);
- ``nt``: chapter 5 (expressive attention on the NT tasks);
- ``hopfield``: chapter 3 (storage capacity beside Theorem 3, the regimes of the heads);
- ``sudoku``: chapters 8 and 9 (the league, the 9×9 runs, voting), beside the no-learning rungs of
  :mod:`energylab.baselines`;
- ``denoising`` and ``sparse_retrieval``: chapter 12 (in-context denoising, metastable sets).

Claims read the experiments (``energylab.experiments``) and their results; no experiment imports a claim.
Submodules are imported on first use.
"""
from energylab._lazy import lazy_submodules

__all__, __getattr__, __dir__ = lazy_submodules(__name__, __path__)
