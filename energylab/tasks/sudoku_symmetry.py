"""The symmetries of Sudoku, drawn at random: the one home of board augmentation.

A board of side n with boxes of br rows × bc columns (``SHAPES``) keeps its validity, and a puzzle keeps its unique
solution and its number of givens, under

* relabelling the digits by any permutation of 1..n;
* permuting the rows inside each band (a band: br consecutive rows) and permuting the bands;
* permuting the columns inside each stack (bc consecutive columns) and permuting the stacks;
* the transpose, only where boxes are square (4×4 and 9×9: a 6×6 board has 2×3 boxes, its transpose has 3×2).

At 9×9 these generate n!·(3!)⁸·2 ≈ 1.2·10¹² views of a board; the small models since HRM and TRM (2025) train on
them on the fly. :func:`augment` draws one per board of a batch, seeded by the caller, so a resumed run sees the
same boards as an uninterrupted one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from energylab.tasks.sudoku_solver import SHAPES

__all__ = ["Symmetry", "random_symmetry", "apply_symmetry", "augment"]


@dataclass(frozen=True)
class Symmetry:
    """One symmetry: ``relabel[d]`` is digit d's new label (``relabel[0] = 0``, blanks stay blank); the new board's
    row i is old row ``rows[i]`` and its column j old column ``cols[j]``; then the transpose if ``transpose``."""

    relabel: np.ndarray  # (n + 1,)
    rows: np.ndarray  # (n,)
    cols: np.ndarray  # (n,)
    transpose: bool

    def cells(self) -> np.ndarray:
        """The same map on flattened boards: new cell k is old cell ``cells()[k]`` (row-major)."""
        n = len(self.rows)
        grid = self.rows[:, None] * n + self.cols[None, :]
        return (grid.T if self.transpose else grid).reshape(-1)


def random_symmetry(size: int, rng: np.random.Generator) -> Symmetry:
    """A symmetry of ``size``×``size`` boards drawn from ``rng`` (at 9×9 in the order
    ``energylab.tasks.sudoku_hard.transform`` has always drawn it, so its boards do not change)."""
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    br, bc = SHAPES[size]
    relabel = np.concatenate([[0], rng.permutation(size) + 1])
    rows = np.concatenate([br * b + rng.permutation(br) for b in rng.permutation(size // br)])
    cols = np.concatenate([bc * b + rng.permutation(bc) for b in rng.permutation(size // bc)])
    transpose = bool(br == bc and rng.random() < 0.5)
    return Symmetry(relabel, rows, cols, transpose)


def apply_symmetry(grid: np.ndarray, sym: Symmetry) -> np.ndarray:
    """``sym`` applied to one (n, n) grid of digits (0 = blank): a new C-contiguous array."""
    out = sym.relabel[np.asarray(grid)][sym.rows][:, sym.cols]
    return np.ascontiguousarray(out.T if sym.transpose else out)


def augment(tokens: torch.Tensor, target: torch.Tensor, size: int,
            rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A random symmetry per board of a batch, as ``SudokuDataset`` encodes it: ``tokens`` (B, n²) digits with 0 for
    a blank, ``target`` (B, n²) the solution's class indices 0..n-1. Returns (tokens, target, mask), mask True on
    the blanks."""
    if tokens.shape != target.shape or tokens.dim() != 2 or tokens.shape[1] != size * size:
        raise ValueError(f"tokens and target must both have shape (B, {size * size}), got {tuple(tokens.shape)} "
                         f"and {tuple(target.shape)}")
    syms = [random_symmetry(size, rng) for _ in range(len(tokens))]
    cells = torch.from_numpy(np.stack([s.cells() for s in syms])).to(tokens.device)  # (B, n²)
    relabel = torch.from_numpy(np.stack([s.relabel for s in syms])).to(tokens.device)  # (B, n + 1)
    new_tokens = relabel.gather(1, tokens.gather(1, cells))
    new_target = relabel.gather(1, target.gather(1, cells) + 1) - 1
    return new_tokens, new_target, new_tokens == 0
