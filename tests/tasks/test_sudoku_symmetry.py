"""Sudoku symmetries (energylab.tasks.sudoku_symmetry): every drawn view of a puzzle is a valid puzzle with the same
givens count and a unique solution, the views cover the group's moves, and augmentation is seeded."""
import numpy as np
import pytest
import torch

from energylab.tasks.sudoku_harness import epoch_batches, load_set
from energylab.tasks.sudoku_solver import SHAPES, count_solutions, geometry
from energylab.tasks.sudoku_symmetry import apply_symmetry, augment, random_symmetry


def valid_solution(grid: np.ndarray) -> bool:
    g = geometry(len(grid))
    flat = grid.reshape(-1)
    return all(sorted(flat[list(u)]) == list(range(1, len(grid) + 1)) for u in g.units)


@pytest.mark.parametrize("size,name", [(4, "4x4-ood"), (6, "6x6-id"), (9, "rrn-like")])
def test_views_keep_validity_givens_and_uniqueness(size, name):
    data = load_set(name, "test", 12, size)
    tokens, target, mask = augment(data.tokens, data.target, size, np.random.default_rng(1))
    assert (tokens != data.tokens).any()  # something moved
    for i in range(len(data)):
        puzzle, solution = tokens[i].reshape(size, size).numpy(), (target[i] + 1).reshape(size, size).numpy()
        assert valid_solution(solution)
        assert ((puzzle == 0) | (puzzle == solution)).all()  # the givens agree with the solution
        assert (puzzle > 0).sum() == (data.puzzles[i] > 0).sum()
        assert count_solutions(puzzle, 2) == 1
    assert torch.equal(mask, tokens == 0)


@pytest.mark.parametrize("size", sorted(SHAPES))
def test_moves_stay_inside_bands_and_stacks(size):
    br, bc = SHAPES[size]
    rng = np.random.default_rng(0)
    transposes, band_moves = 0, 0
    for _ in range(200):
        s = random_symmetry(size, rng)
        assert sorted(s.relabel) == list(range(size + 1)) and s.relabel[0] == 0
        for rows, b in ((s.rows, br), (s.cols, bc)):
            assert sorted(rows) == list(range(size))
            bands = rows.reshape(-1, b) // b  # each block of b new rows comes from one old band
            assert (bands == bands[:, :1]).all()
        band_moves += int((s.rows // br != np.arange(size) // br).any())
        transposes += s.transpose
    assert band_moves > 100  # bands are permuted (the identity band order has probability 1/(size/br)!)
    assert (transposes == 0) if br != bc else (60 < transposes < 140)


def test_flat_map_matches_grid_map():
    rng = np.random.default_rng(5)
    grid = np.arange(81).reshape(9, 9) % 9 + 1
    for _ in range(20):
        s = random_symmetry(9, rng)
        relabel = s.relabel.copy()
        s_plain = type(s)(np.arange(10), s.rows, s.cols, s.transpose)
        assert np.array_equal(apply_symmetry(grid, s_plain).reshape(-1), grid.reshape(-1)[s.cells()])
        assert relabel[0] == 0


def test_augmented_batches_are_seeded_per_step():
    data = load_set("4x4-id", "train", 64, 4)
    plain, _ = epoch_batches(data, 16, seed=3)
    first, _ = epoch_batches(data, 16, seed=3, augment=True)
    again, _ = epoch_batches(data, 16, seed=3, augment=True)
    for step in (0, 5):
        assert all(torch.equal(a, b) for a, b in zip(first(step), again(step)))  # a resumed run sees the same
    assert not torch.equal(first(0)[0], plain(0)[0])
    assert not torch.equal(first(0)[0], first(4)[0])  # step 4 = the same boards next epoch, another view
    with pytest.raises(ValueError, match="shape"):
        augment(data.tokens[:, :15], data.target[:, :15], 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="size must be one of"):
        random_symmetry(5, np.random.default_rng(0))
