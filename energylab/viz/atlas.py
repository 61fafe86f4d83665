"""Figure of the Atlas chapter: the verification error of every catalog form on one log axis."""
from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from energylab._setup import format_error
from energylab.catalog import EXACT_TOL, ORDER_TOL
from energylab.viz import PALETTE

_KIND_COLOR = {"gradient": PALETTE[0], "newton": PALETTE[2], "approx": PALETTE[1]}


def verify_errors_figure(names: Sequence[str], errors: Sequence[float], kinds: Sequence[str],
                         floor: float = 1e-12, exact_tol: float = EXACT_TOL, order_tol: float = ORDER_TOL) -> go.Figure:
    """Bars of ``catalog.verify`` errors per form (log y), coloured by kind, with the two test tolerances.

    gradient/newton forms report ‖update − autograd‖/‖autograd‖; approx forms report |fitted order − order|/order,
    a different quantity, drawn in its own colour. Errors below ``floor`` (round-off, whose digits
    change with summation order) are drawn at ``floor`` and labelled as below it, so the figure is reproducible.
    """
    if not (len(names) == len(errors) == len(kinds)):
        raise ValueError(f"names, errors and kinds must have one entry per form, got lengths "
                         f"{len(names)}, {len(errors)}, {len(kinds)}")
    unknown = sorted(set(kinds) - set(_KIND_COLOR))
    if unknown:
        raise ValueError(f"kinds must be among {sorted(_KIND_COLOR)}, got {unknown}")
    fig = go.Figure()
    for kind, color in _KIND_COLOR.items():
        picked = [(n, float(e)) for n, e, k in zip(names, errors, kinds) if k == kind]
        if not picked:
            continue
        label = "approx: error of the fitted order" if kind == "approx" else f"{kind}: relative error"
        fig.add_trace(go.Bar(
            x=[n for n, _ in picked], y=[max(e, floor) for _, e in picked], name=label, marker_color=color,
            customdata=[format_error(e, floor) for _, e in picked],
            hovertemplate="%{x}<br>error = %{customdata}<extra></extra>"))
    for y, text, color in [(exact_tol, f"exact forms: test bound {exact_tol:.0e}", PALETTE[0]),
                           (order_tol, f"approx forms: test bound {order_tol:g}", PALETTE[1])]:
        fig.add_hline(y=y, line_dash="dash", line_color=color, annotation_text=text,
                      annotation_position="top left")
    fig.update_layout(title="catalog.verify: max error over random float64 instances", height=460,
                      xaxis={"categoryorder": "array", "categoryarray": list(names), "tickangle": -40},
                      yaxis_title="max error (log scale)", legend={"orientation": "h", "y": 1.08, "x": 0},
                      margin={"l": 60, "r": 20, "t": 80, "b": 140}, barmode="overlay")
    fig.update_yaxes(type="log", range=[-13, 0], exponentformat="power")
    return fig


def forms_figure(summary: Sequence[dict], title: str = "") -> go.Figure:
    """Board accuracy (mean ± spread over seeds) against time per step relative to the softmax block, one point per
    looped block of :mod:`energylab.experiments.forms`; the marker area grows with the parameter count."""
    if not summary:
        raise ValueError("summary must hold at least one row")
    largest = max(r["parameters"] for r in summary)
    fig = go.Figure(go.Scatter(
        x=[r["time_ratio"] for r in summary], y=[r["board"] for r in summary], mode="markers+text",
        text=[r["layer"] for r in summary], textposition="top center",
        error_y={"type": "data", "array": [r["board_std"] for r in summary], "visible": True},
        marker={"size": [8 + 16 * (r["parameters"] / largest) ** 0.5 for r in summary], "color": PALETTE[0]},
        customdata=[[r["cell"], r["parameters"]] for r in summary],
        hovertemplate="%{text}<br>boards %{y:.3f}, cells %{customdata[0]:.3f}<br>time ratio %{x:.2f}"
                      "<br>%{customdata[1]:,} parameters<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="time per step / softmax block (same run)",
                      yaxis_title="boards solved (held out)", height=480, showlegend=False)
    return fig
