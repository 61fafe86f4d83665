"""Damaged public Sudoku files (issue 47, remaining part): SATNet tensors of a dtype or layout the reader has no kernel
for, and RRN files whose first board was silently taken for a header, each a ValueError naming the file."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from energylab.tasks import sudoku as S


def _boards(n=3):
    from energylab.tasks.sudoku_generate import generate

    return generate(n, (30, 32), seed=0)


def _satnet_files(folder, convert=lambda t: t):
    puzzles, solutions = _boards()
    for name, boards in (("features.pt", puzzles), ("labels.pt", solutions)):
        one_hot = torch.nn.functional.one_hot(torch.tensor(boards), 10)[..., 1:].float()
        torch.save(convert(one_hot) if name == "features.pt" else one_hot, folder / name)


@pytest.mark.parametrize("convert, shown", [
    (lambda t: t.to(torch.complex64), "layout torch.strided and dtype torch.complex64"),
    (lambda t: t.to_sparse(), "layout torch.sparse_coo and dtype torch.float32"),
])
def test_satnet_tensors_without_a_dense_real_layout_are_named(tmp_path, convert, shown):
    """Before: a complex file was a raw argmax RuntimeError, a sparse one a raw NotImplementedError of the kernels."""
    _satnet_files(tmp_path, convert)
    with pytest.raises(ValueError, match=rf"^{tmp_path}/features.pt: expected a dense real tensor, got {shown}"):
        S.load_satnet(tmp_path, "all")


def test_satnet_boolean_one_hots_are_read(tmp_path):
    """Before: a one-hot of booleans (a valid encoding) was a raw 'argmax(): does not support bool input'."""
    _satnet_files(tmp_path, lambda t: t.bool())
    puzzles, _ = _boards()
    assert np.array_equal(S.load_satnet(tmp_path, "all").puzzles, puzzles)


def _rrn_rows():
    puzzles, solutions = _boards()
    return ["".join(map(str, p.ravel())) + "," + "".join(map(str, s.ravel())) for p, s in zip(puzzles, solutions)]


def test_a_damaged_first_rrn_board_is_an_error_not_a_header(tmp_path):
    """Before: a first board with one bad character was taken for a header and dropped without a word."""
    rows = _rrn_rows()
    path = tmp_path / "train.csv"
    path.write_text("\n".join([rows[0].replace("0", "x", 1)] + rows[1:]) + "\n")
    with pytest.raises(ValueError, match=rf"^{path}:1: expected digits 0-9 or '\.'"):
        S.load_rrn(tmp_path)
    path.write_text("quizzes,solutions\n" + "\n".join(rows) + "\n")  # a header is still skipped
    assert len(S.load_rrn(tmp_path)) == 3


def test_an_rrn_file_with_a_byte_order_mark_keeps_its_first_board(tmp_path):
    """Before: a UTF-8 byte-order mark made the first board read as a header: 2 boards of 3, without a word."""
    path = tmp_path / "train.csv"
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(_rrn_rows()).encode())
    assert len(S.load_rrn(tmp_path)) == 3


def test_rrn_seed_is_checked_as_an_int(tmp_path):
    """Before: seed=True sampled with seed 1 and a NumPy int was refused as 'not a non-negative int'."""
    (tmp_path / "train.csv").write_text("\n".join(_rrn_rows()))
    with pytest.raises(TypeError, match=r"^seed must be an int, got True"):
        S.load_rrn(tmp_path, limit=2, seed=True)
    with pytest.raises(ValueError, match=r"^seed must be an int >= 0, got -1"):
        S.load_rrn(tmp_path, limit=2, seed=-1)
    assert len(S.load_rrn(tmp_path, limit=2, seed=np.int64(1))) == 2
