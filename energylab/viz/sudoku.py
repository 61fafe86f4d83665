"""Plotly figures for Sudoku boards (4×4, 6×6, 9×9): givens vs a model's predictions, mistakes highlighted."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

SHAPES = {4: (2, 2), 6: (2, 3), 9: (3, 3)}  # side -> box (rows, columns), as energylab.tasks.sudoku_solver
GIVEN, RIGHT, WRONG = "#222222", "#1f77b4", "#d62728"  # digit colours: givens, correct and wrong predictions


def _grid(name: str, board, allow_none: bool = False, n: int | None = None) -> np.ndarray | None:
    """An (n, n) int array from a numpy array / tensor / nested list of shape (n, n) or (n²,), n in 4, 6, 9
    (``n=None``: from the shape)."""
    if board is None and allow_none:
        return None
    if hasattr(board, "detach"):
        board = board.detach().cpu().numpy()
    arr = np.asarray(board)
    sizes = [n] if n is not None else list(SHAPES)
    side = next((s for s in sizes if arr.shape in ((s, s), (s * s,))), None)
    if side is None:
        shown = " or ".join(f"({s}, {s}) or ({s * s},)" for s in sizes)
        raise ValueError(f"{name} must have shape {shown}, got {arr.shape}")
    arr = arr.reshape(side, side).astype(np.int64)  # (n²,) -> (n, n)
    if arr.min() < 0 or arr.max() > side:
        raise ValueError(f"{name} values must lie in 0..{side}")
    return arr


def board_figure(puzzle, prediction=None, solution=None, title: str | None = None, size: int = 360) -> go.Figure:
    """Draw a board: givens dark on grey, predicted digits in blue, wrong ones in red on a pink cell.

    puzzle: (n, n) or (n²,) digits, 0 = blank, n = 4, 6 (2×3 boxes) or 9. prediction: digits 1..n for the
    cells (givens are not redrawn; 0 = no prediction), or None to show the bare puzzle. solution: the true
    grid; with it, predicted digits that differ are marked as mistakes (the title gets the count).
    """
    puzzle = _grid("puzzle", puzzle)
    n = len(puzzle)
    prediction = _grid("prediction", prediction, allow_none=True, n=n)
    solution = _grid("solution", solution, allow_none=True, n=n)
    rows, cols = np.mgrid[0:n, 0:n]  # (n, n) cell coordinates, row 0 at the top
    groups = {"given": (puzzle > 0, puzzle, GIVEN)}
    if prediction is not None:
        shown = (puzzle == 0) & (prediction > 0)
        wrong = shown & (prediction != solution) if solution is not None else np.zeros_like(shown)
        groups["predicted"] = (shown & ~wrong, prediction, RIGHT)
        groups["mistake"] = (wrong, prediction, WRONG)
    shade = (puzzle > 0).astype(float)  # cell backgrounds: 0 blank, 1 given, 2 mistake
    if "mistake" in groups:
        shade[groups["mistake"][0]] = 2.0
    fig = go.Figure(go.Heatmap(z=shade[::-1].tolist(), x0=0.5, dx=1, y0=0.5, dy=1, zmin=0, zmax=2, showscale=False,
                               colorscale=[[0, "#ffffff"], [0.5, "#eeeeee"], [1, "#f6c6c6"]], hoverinfo="skip"))
    for name, (sel, digits, color) in groups.items():
        fig.add_trace(go.Scatter(
            x=(cols[sel] + 0.5).tolist(), y=(n - 0.5 - rows[sel]).tolist(), mode="text", name=name,
            text=[str(int(d)) for d in digits[sel]], showlegend=bool(sel.any()) and prediction is not None,
            textfont={"size": int(size / (2.2 * n)), "color": color,
                      "family": "Arial Black" if name == "given" else "Arial"},
            hoverinfo="skip"))
    br, bc = SHAPES[n]
    for k in range(n + 1):  # thin cell lines, thick box lines (rows of a box are horizontal lines)
        fig.add_shape(type="line", x0=k, x1=k, y0=0, y1=n,
                      line={"width": 2.5 if k % bc == 0 else 0.6, "color": "#444"})
        fig.add_shape(type="line", x0=0, x1=n, y0=n - k, y1=n - k,
                      line={"width": 2.5 if k % br == 0 else 0.6, "color": "#444"})
    if title is None and prediction is not None and solution is not None:
        blanks = int((puzzle == 0).sum())
        wrong = int(groups["mistake"][0].sum())
        title = f"{wrong} mistake{'' if wrong == 1 else 's'} on {blanks} blanks"
    fig.update_xaxes(range=[-0.05, n + 0.05], visible=False, constrain="domain")
    fig.update_yaxes(range=[-0.05, n + 0.05], visible=False, scaleanchor="x", scaleratio=1)
    fig.update_layout(title=title, width=size + (110 if prediction is not None else 0), height=size + 40,
                      margin={"l": 10, "r": 10, "t": 40 if title else 10, "b": 10}, plot_bgcolor="white")
    return fig


def givens_figure(sets: dict, title: str = "Givens per board") -> go.Figure:
    """Share of boards with each number of givens, one bar group per set ({name: (n, s, s) puzzles})."""
    from energylab.viz import PALETTE

    fig = go.Figure()
    for k, (name, puzzles) in enumerate(sets.items()):
        arr = np.asarray(puzzles.detach().cpu() if hasattr(puzzles, "detach") else puzzles)
        if arr.ndim != 3 or arr.shape[1] not in SHAPES or arr.shape[2] != arr.shape[1]:
            raise ValueError(f"sets[{name!r}] must have shape (n, s, s) with s in {sorted(SHAPES)}, got {arr.shape}")
        cells = arr.shape[1] ** 2
        counts = np.bincount((arr > 0).reshape(len(arr), cells).sum(1), minlength=cells + 1)
        ks = np.nonzero(counts)[0]
        fig.add_trace(go.Bar(x=ks.tolist(), y=(counts[ks] / len(arr)).tolist(), name=name,
                             marker_color=PALETTE[k % len(PALETTE)]))
    fig.update_layout(title=title, xaxis_title="givens", yaxis_title="share of boards", barmode="group", height=340,
                      margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig


__all__ = ["board_figure", "givens_figure"]
