"""Input-blind baselines: what a predictor that ignores the input (or uses only what the task states) scores.

Every score the book reports stands beside one of these (DESIGN.md, "Quality bars"); a model that does not beat its
baseline has learnt nothing the scoring can see.

- Images (chapter 7): :func:`mean_image_prediction` paints the mean training image into every position, whatever the
  input; :func:`class_mean_prediction` paints the per-position mean of the test image's own class, a reference that
  knows the label the masked context would have to reveal (not input-blind: it is given the class).
  :func:`image_baselines` scores both with the experiment's metric (:func:`energylab.tasks.images.masked_mse`).
  One rung up, a baseline that reads the input but learns nothing: :func:`shrink_prediction`, a per-pixel linear
  shrink of the corrupted input toward the mean training image, ``m + a * (x - m)`` with one coefficient ``a`` per
  pixel fitted in closed form on corrupted training images (:func:`shrink_coefficients`). It needs every pixel
  observed (denoising); at a masked pixel it has nothing to read, so there it would paint the mean image.
- Classification and next-token tasks (chapters 4 and 5): :func:`constant_accuracy`, the share of test targets
  equal to the most frequent training target (the best constant predictor); :func:`constant_row_accuracy` the
  same for whole rows (a trace that is right only if every token is).
- Sudoku (chapters 8 and 9), three rungs: :func:`sudoku_blind_vote` writes into each blank the digit most frequent
  at that cell in a reference set of solutions, whatever the clues (truly input-blind: it solves no board);
  :func:`sudoku_baseline` (one elimination) does the same among the digits the clues' row, column and box leave
  open, so it reads the clues but never reasons past one elimination; :func:`sudoku_propagation` is the strongest
  no-learning baseline that reads the input without search: constraint propagation (naked and hidden singles)
  until nothing changes. Most generated 4×4 and 6×6 boards, and many 9×9 ones, need no search at all, so a looped
  layer that solves them has learnt propagation; only boards propagation leaves open test more.
  :func:`sudoku_rungs` scores all three (:data:`SUDOKU_RUNGS`), as chapters 8 to 11 print them beside every model.
"""
from __future__ import annotations

import numpy as np
import torch

from energylab._checks import check_tensor
from energylab.tasks.images import masked_mse
from energylab.tasks.sudoku import SudokuDataset, sudoku_accuracy
from energylab.tasks.sudoku_solver import SHAPES, geometry


def mean_image_prediction(train: torch.Tensor, batch: int) -> torch.Tensor:
    """The mean training item, repeated ``batch`` times: (P, ...) -> (batch, ...) (same dtype as ``train``)."""
    check_tensor("train", train)
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise ValueError(f"batch must be a positive int, got {batch!r}")
    return train.mean(0, keepdim=True).expand(batch, *train.shape[1:]).clone()


def class_mean_prediction(train: torch.Tensor, train_labels: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-position mean of the training items of each requested class: (P, ...), (P,), (B,) -> (B, ...).

    A class absent from training raises ValueError (there is no mean to paint)."""
    check_tensor("train", train)
    for name, lab in (("train_labels", train_labels), ("labels", labels)):
        if not isinstance(lab, torch.Tensor) or lab.dtype not in (torch.int64, torch.int32) or lab.dim() != 1:
            raise TypeError(f"{name} must be a 1-d integer tensor, got {getattr(lab, 'dtype', type(lab))}")
    if len(train_labels) != len(train):
        raise ValueError(f"train_labels must have one label per training item: {len(train)}, got {len(train_labels)}")
    missing = sorted(set(labels.tolist()) - set(train_labels.tolist()))
    if missing:
        raise ValueError(f"labels {missing} never occur in train_labels")
    classes = int(max(train_labels.max(), labels.max())) + 1
    flat = train.reshape(len(train), -1)  # (P, D)
    sums = torch.zeros(classes, flat.shape[1], dtype=train.dtype).index_add_(0, train_labels.long(), flat)
    counts = torch.bincount(train_labels.long(), minlength=classes).to(train.dtype).clamp(min=1)
    return (sums / counts[:, None])[labels.long()].reshape(len(labels), *train.shape[1:])


def image_baselines(train: torch.Tensor, target: torch.Tensor, patch_fn, mask: torch.Tensor | None = None,
                    train_labels: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                    train_corrupted: torch.Tensor | None = None, corrupted: torch.Tensor | None = None
                    ) -> dict[str, float]:
    """MSE of the baselines with the experiment's metric: the mean over images of
    :func:`~energylab.tasks.images.masked_mse` (masked pixels only when ``mask`` (B, N) is given).

    train: (P, H, W) training images; target: (B, N, a) clean test patches; ``patch_fn``: (B, H, W) -> (B, N, a),
    the experiment's patching. Returns ``{"mean_digit": ...}`` plus ``"class_mean"`` when both label tensors are
    given, plus ``"shrink"`` (:func:`shrink_prediction`) when ``train_corrupted`` (P, H, W), the training images
    under the task's corruption, and ``corrupted`` (B, N, a), the test inputs as pixel patches, are both given.
    """
    check_tensor("target", target, 3)
    out = {"mean_digit": float(masked_mse(patch_fn(mean_image_prediction(train, len(target))).to(target),
                                          target, mask).mean())}
    if (train_labels is None) != (labels is None):
        raise ValueError("give both train_labels and labels, or neither")
    if labels is not None:
        if len(labels) != len(target):
            raise ValueError(f"labels must have one label per target image: {len(target)}, got {len(labels)}")
        pred = patch_fn(class_mean_prediction(train, train_labels, labels)).to(target)
        out["class_mean"] = float(masked_mse(pred, target, mask).mean())
    if (train_corrupted is None) != (corrupted is None):
        raise ValueError("give both train_corrupted and corrupted, or neither")
    if corrupted is not None:
        check_tensor("corrupted", corrupted, 3)
        if corrupted.shape != target.shape:
            raise ValueError(f"corrupted must have the shape of target {tuple(target.shape)}, got "
                             f"{tuple(corrupted.shape)}")
        pred = shrink_prediction(patch_fn(train), patch_fn(train_corrupted), corrupted.to(train))
        out["shrink"] = float(masked_mse(pred.to(target), target, mask).mean())
    return out


def shrink_coefficients(clean: torch.Tensor, corrupted: torch.Tensor) -> torch.Tensor:
    """Per-position coefficients ``a`` of the linear shrink toward the mean ``m = clean.mean(0)``.

    clean, corrupted: (P, ...) the training items and their corrupted versions (same shape). For each position p,
    ``a_p`` is the least-squares slope of ``clean - m`` on ``corrupted - m`` through the origin,

        a_p = sum_n (corrupted_np - m_p) (clean_np - m_p) / sum_n (corrupted_np - m_p)^2,

    the closed form of min_a sum_n (m_p + a (corrupted_np - m_p) - clean_np)^2 (0 where every corrupted item equals
    the mean there). Returns (...) in the dtype of ``clean``."""
    check_tensor("clean", clean)
    check_tensor("corrupted", corrupted)
    if clean.shape != corrupted.shape or clean.dim() < 2:
        raise ValueError(f"clean and corrupted must have one shape (P, ...) with P items, got {tuple(clean.shape)} "
                         f"and {tuple(corrupted.shape)}")
    m = clean.mean(0)
    dx, dy = corrupted.to(clean) - m, clean - m
    num, den = (dx * dy).sum(0), (dx * dx).sum(0)
    return torch.where(den > 0, num / den.clamp(min=torch.finfo(den.dtype).tiny), torch.zeros_like(num))


def shrink_prediction(train: torch.Tensor, train_corrupted: torch.Tensor, corrupted: torch.Tensor) -> torch.Tensor:
    """The per-pixel linear shrink toward the mean training item: ``m + a * (corrupted - m)``.

    train, train_corrupted: (P, ...) the training items, clean and corrupted by the task's corruption (another draw
    than the test's); corrupted: (B, ...) the test inputs. ``m`` is the mean training item and ``a`` the per-position
    coefficients of :func:`shrink_coefficients`, fitted on the training pairs in closed form. No learning, no
    neighbours: each pixel's prediction reads that pixel of the input only. Returns (B, ...)."""
    a = shrink_coefficients(train, train_corrupted)
    check_tensor("corrupted", corrupted)
    if corrupted.shape[1:] != train.shape[1:]:
        raise ValueError(f"corrupted must be (B, {', '.join(map(str, train.shape[1:]))}) like the training items, "
                         f"got {tuple(corrupted.shape)}")
    m = train.mean(0)
    return m + a * (corrupted.to(train) - m)


def _int_targets(name: str, x) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer torch tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    if x.numel() == 0:
        raise ValueError(f"{name} must not be empty")
    return x


def constant_accuracy(train_targets: torch.Tensor, test_targets: torch.Tensor) -> float:
    """Accuracy on ``test_targets`` of always answering the most frequent of ``train_targets`` (ties: the smallest
    value). Both are integer tensors of any shape; counts are exact, the ratio a Python float."""
    train_targets, test_targets = _int_targets("train_targets", train_targets), _int_targets("test_targets",
                                                                                           test_targets)
    values, counts = torch.unique(train_targets.flatten(), return_counts=True)  # values sorted ascending
    best = values[int(torch.argmax(counts))]  # argmax returns the first maximum: the smallest tied value
    return int((test_targets == best).sum()) / test_targets.numel()


def constant_row_accuracy(train_rows: torch.Tensor, test_rows: torch.Tensor) -> float:
    """:func:`constant_accuracy` for whole rows: (n, k) integer tensors; the most frequent training row, scored by
    exact match on every test row."""
    train_rows, test_rows = _int_targets("train_rows", train_rows), _int_targets("test_rows", test_rows)
    if train_rows.dim() != 2 or test_rows.dim() != 2 or train_rows.shape[1] != test_rows.shape[1]:
        raise ValueError(f"train_rows and test_rows must be (n, k) with one k, got {tuple(train_rows.shape)} and "
                         f"{tuple(test_rows.shape)}")
    rows, counts = torch.unique(train_rows, dim=0, return_counts=True)
    best = rows[int(torch.argmax(counts))]
    return int((test_rows == best).all(1).sum()) / len(test_rows)


def sudoku_candidates(puzzles: np.ndarray) -> np.ndarray:
    """Digits each cell can still take after one elimination by the clues of its row, column and box.

    puzzles: (n, s, s) ints, 0 = blank. Returns bool (n, s, s, s): [b, r, c, k] is True iff digit k + 1 occurs
    neither in row r, column c nor the box of (r, c). A given cell keeps exactly its own digit.
    """
    p = np.asarray(puzzles)
    if p.ndim != 3 or p.shape[1] != p.shape[2] or p.shape[1] not in SHAPES:
        raise ValueError(f"puzzles must have shape (n, s, s) with s in {sorted(SHAPES)}, got {p.shape}")
    n, s = p.shape[:2]
    br, bc = SHAPES[s]
    onehot = np.zeros((n, s, s, s + 1), dtype=bool)
    np.put_along_axis(onehot, p[..., None].astype(np.int64), True, axis=-1)
    onehot = onehot[..., 1:]  # (n, s, s, s): digit k + 1 sits at (r, c)
    row = onehot.any(2, keepdims=True)  # (n, s, 1, s)
    col = onehot.any(1, keepdims=True)  # (n, 1, s, s)
    box = onehot.reshape(n, s // br, br, s // bc, bc, s).any((2, 4), keepdims=True)  # (n, s/br, 1, s/bc, 1, s)
    box = np.broadcast_to(box, (n, s // br, br, s // bc, bc, s)).reshape(n, s, s, s)
    free = ~(row | col | box)
    return np.where((p > 0)[..., None], onehot, free)


def sudoku_baseline(dataset: SudokuDataset, reference: SudokuDataset | None = None) -> dict[str, float]:
    """Board and cell accuracy on the blanks of ``dataset`` of one elimination and a per-cell vote.

    Each blank gets, among the digits its row, column and box clues leave open (:func:`sudoku_candidates`), the one
    most frequent at that cell in ``reference``'s solutions (default: none, every digit equally frequent); ties go
    to the smallest digit. A cell with no open digit (impossible for a valid puzzle) gets the reference's most
    frequent digit there. Returns ``{"cell": ..., "board": ...}`` as :func:`~energylab.tasks.sudoku.sudoku_accuracy`
    computes them with the blank mask.
    """
    if not isinstance(dataset, SudokuDataset):
        raise TypeError(f"dataset must be an energylab.tasks.sudoku.SudokuDataset, got {type(dataset).__name__}")
    s = dataset.size
    freq = np.zeros((s, s, s)) if reference is None else _cell_frequencies(reference, s)
    cand = sudoku_candidates(dataset.puzzles)  # (n, s, s, s)
    # open digits score their frequency + 1 (so an open digit always beats a closed one), closed ones 0
    score = np.where(cand, freq[None] + 1.0, 0.0)
    score = np.where(cand.any(-1, keepdims=True), score, freq[None])
    pred = score.argmax(-1).reshape(len(dataset), s * s)  # argmax: the first maximum, the smallest digit
    return sudoku_accuracy(torch.from_numpy(pred), dataset.target, dataset.mask)


def _cell_frequencies(reference: SudokuDataset, size: int) -> np.ndarray:
    """(size, size, size): [r, c, k] = how many of ``reference``'s solutions have digit k + 1 at (r, c)."""
    if not isinstance(reference, SudokuDataset) or reference.size != size:
        raise ValueError(f"reference must be a SudokuDataset of size {size}, got "
                         f"{getattr(reference, 'size', type(reference).__name__)}")
    return np.stack([(reference.solutions == k + 1).sum(0) for k in range(size)], -1).astype(np.float64)


def sudoku_blind_vote(dataset: SudokuDataset, reference: SudokuDataset) -> dict[str, float]:
    """Board and cell accuracy on the blanks of ``dataset`` of writing into each blank the digit most frequent at
    that cell among ``reference``'s solutions (ties: the smallest digit), ignoring every clue: the input-blind
    baseline (a valid board needs every digit once per row, so it solves none)."""
    for name, d in (("dataset", dataset), ("reference", reference)):
        if not isinstance(d, SudokuDataset):
            raise TypeError(f"{name} must be an energylab.tasks.sudoku.SudokuDataset, got {type(d).__name__}")
    s = dataset.size
    freq = _cell_frequencies(reference, s)
    pred = np.broadcast_to(freq.argmax(-1).reshape(1, s * s), (len(dataset), s * s))
    return sudoku_accuracy(torch.from_numpy(np.ascontiguousarray(pred)), dataset.target, dataset.mask)


def propagate_boards(puzzles: np.ndarray) -> np.ndarray:
    """Each board after constraint propagation alone: naked singles (a cell with one candidate places it) and
    hidden singles (a digit with one place in a row, column or box goes there), repeated until nothing changes,
    with no guess and no search. puzzles: (n, s, s) ints, 0 = blank. Returns (n, s, s): every cell propagation
    decides holds its digit, the others 0 (and a board whose clues contradict themselves comes back unchanged)."""
    p = np.asarray(puzzles)
    if p.ndim != 3 or p.shape[1] != p.shape[2] or p.shape[1] not in SHAPES:
        raise ValueError(f"puzzles must have shape (n, s, s) with s in {sorted(SHAPES)}, got {p.shape}")
    if p.size and (p.min() < 0 or p.max() > p.shape[1]):
        raise ValueError(f"puzzles must hold 0..{p.shape[1]} (0 = blank), got [{p.min()}, {p.max()}]")
    s = p.shape[1]
    geo = geometry(s)
    out = np.zeros_like(p, dtype=np.int64)
    for b, board in enumerate(p.reshape(len(p), s * s).tolist()):
        cand = geo.propagated(board)  # energylab.tasks.sudoku_solver: singles until nothing changes
        if cand is not None:
            out[b] = np.array([geo.digit.get(m, 0) for m in cand]).reshape(s, s)
        else:
            out[b] = p[b]
    return out


def sudoku_propagation(dataset: SudokuDataset) -> dict[str, float]:
    """Board and cell accuracy on the blanks of ``dataset`` of :func:`propagate_boards` (an undecided cell counts
    as wrong), and ``decided``: the share of boards propagation completes. No learning, no search: the strongest
    baseline of the book's Sudoku tables that reads only the input."""
    if not isinstance(dataset, SudokuDataset):
        raise TypeError(f"dataset must be an energylab.tasks.sudoku.SudokuDataset, got {type(dataset).__name__}")
    filled = propagate_boards(dataset.puzzles)
    s = dataset.size
    pred = torch.from_numpy(filled.reshape(len(dataset), s * s) - 1)  # digit d -> class d - 1; undecided -> -1
    scores = sudoku_accuracy(pred, dataset.target, dataset.mask)
    return {**scores, "decided": float((filled > 0).all((1, 2)).mean())}  # a SudokuDataset holds >= 1 board


def sudoku_propagation_guess(dataset: SudokuDataset) -> dict[str, float]:
    """:func:`sudoku_propagation`, then every cell it leaves undecided filled with a digit drawn uniformly from that
    cell's candidates (:func:`sudoku_candidates` of the propagated board): the expected cell and board accuracy on
    the blanks, computed exactly (no sampling). The no-learning cell score to beat on boards that need search, where
    propagation alone leaves cells empty and so counts them wrong. On a unique puzzle propagation places only right
    digits, so the solution's digit is among every undecided cell's candidates."""
    if not isinstance(dataset, SudokuDataset):
        raise TypeError(f"dataset must be an energylab.tasks.sudoku.SudokuDataset, got {type(dataset).__name__}")
    filled = propagate_boards(dataset.puzzles)
    blanks = dataset.puzzles == 0
    undecided = blanks & (filled == 0)
    chance = np.where(undecided, 1.0 / np.maximum(sudoku_candidates(filled).sum(-1), 1), 1.0)  # right with this
    per_cell = np.where(blanks, chance, 0.0)
    return {"cell": float(per_cell.sum() / blanks.sum()),
            "board": float(np.prod(np.where(blanks, chance, 1.0), axis=(1, 2)).mean())}


# The no-learning baselines every Sudoku score of chapters 8 and 9 stands beside, weakest first
SUDOKU_RUNGS = ("blind", "one elimination", "propagation")


def sudoku_rungs(test: SudokuDataset, train: SudokuDataset) -> dict[str, dict[str, float]]:
    """Board and cell accuracy on ``test`` of the three no-learning baselines (:data:`SUDOKU_RUNGS`): the input-blind
    per-cell vote and one elimination (both with ``train``'s solutions as the reference), and constraint propagation
    without search."""
    return {"blind": sudoku_blind_vote(test, train), "one elimination": sudoku_baseline(test, train),
            "propagation": sudoku_propagation(test)}


__all__ = ["mean_image_prediction", "class_mean_prediction", "shrink_coefficients", "shrink_prediction",
           "image_baselines", "constant_accuracy",
           "constant_row_accuracy", "sudoku_candidates", "sudoku_baseline", "sudoku_blind_vote",
           "propagate_boards", "sudoku_propagation",
           "sudoku_propagation_guess", "SUDOKU_RUNGS", "sudoku_rungs"]
