"""Plotly figures for the book, and the renderer that makes them show up everywhere.

All plotting lives in this package (``energylab.viz.<topic>`` modules): functions from tensors
to ``plotly.graph_objects.Figure``, no model logic inside.

Why a renderer of our own: plotly 6+ puts only ``application/vnd.plotly.v1+json`` in a notebook
output. JupyterLab draws that, but Jupyter Book 1 (and GitHub's viewer) drop it, so a static page
would show nothing. The book renderer emits that mimetype *and* a ``text/html`` bundle that calls
the ``Plotly`` global, which the website loads once from a local copy of plotly.min.js. The div id
is derived from the figure's content, so re-running a notebook gives byte-identical outputs
(the notebook regression tests compare them). Figure data are rounded to :data:`FIGURE_DIGITS` significant
digits, so that the last bits of a float (which differ between processors) never reach a page.
"""
from __future__ import annotations

import hashlib
import json
import math

import plotly.graph_objects as go
import plotly.io as pio
from plotly.io.base_renderers import MimetypeRenderer

RENDERER_NAME = "energylab_book"
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]


class BookRenderer(MimetypeRenderer):
    """Emit the plotly JSON mimetype plus a self-contained ``text/html`` div (no embedded plotly.js)."""

    def to_mimebundle(self, fig_dict):
        plain = rounded(json.loads(json.dumps(fig_dict, cls=_encoder())))
        fig_json = json.dumps(plain, sort_keys=True)
        div_id = "fig-" + hashlib.sha1(fig_json.encode()).hexdigest()[:12]
        html = pio.to_html(
            plain,
            include_plotlyjs=False,
            include_mathjax=False,
            full_html=False,
            div_id=div_id,
            validate=False,
            config={"displaylogo": False, "responsive": True},
        )
        spec = {"data": plain.get("data", []), "layout": plain.get("layout", {}), "config": {}}
        if plain.get("frames"):  # animations: JupyterLab's play button needs the frames too
            spec["frames"] = plain["frames"]
        return {"application/vnd.plotly.v1+json": spec, "text/html": html}


FIGURE_DIGITS = 6  # significant digits kept in figure data: what a reader can see, and not the processor's last bits


def rounded(value, digits: int = FIGURE_DIGITS):
    """``value`` (nested dicts/lists from JSON) with every float rounded to ``digits`` significant digits.

    The last bits of a float differ between processors (kernels chosen per CPU); a figure needs far fewer digits,
    and rounding also shrinks the pages. Integers, strings and non-finite floats pass through unchanged.
    """
    if isinstance(value, float):
        return float(f"{value:.{digits}g}") if math.isfinite(value) else value
    if isinstance(value, list):
        return [rounded(v, digits) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    return value


def _encoder():
    from plotly.utils import PlotlyJSONEncoder

    return PlotlyJSONEncoder


def use_book_renderer() -> None:
    """Register and select the book renderer (idempotent)."""
    if RENDERER_NAME not in pio.renderers:
        pio.renderers[RENDERER_NAME] = BookRenderer()
    pio.renderers.default = RENDERER_NAME
    pio.templates.default = "plotly_white"


def line_figure(x, ys: dict, title: str, xaxis: str, yaxis: str, log_y: bool = False) -> go.Figure:
    """Several named curves over a shared x axis: the book's workhorse plot."""
    fig = go.Figure()
    for k, (name, y) in enumerate(ys.items()):
        fig.add_trace(go.Scatter(x=list(map(float, x)), y=[float(v) for v in y], mode="lines+markers",
                                 name=name, line={"color": PALETTE[k % len(PALETTE)]}))
    fig.update_layout(title=title, xaxis_title=xaxis, yaxis_title=yaxis, height=380,
                      margin={"l": 60, "r": 20, "t": 50, "b": 50})
    if log_y:
        fig.update_yaxes(type="log")
    return fig


def bar_figure(categories, bars: dict, title: str, yaxis: str) -> go.Figure:
    """Grouped bars: one group per category, one named bar series per entry of ``bars`` (a value per category)."""
    fig = go.Figure()
    for k, (name, y) in enumerate(bars.items()):
        fig.add_trace(go.Bar(x=[str(c) for c in categories], y=[float(v) for v in y], name=name,
                             marker_color=PALETTE[k % len(PALETTE)]))
    fig.update_layout(title=title, yaxis_title=yaxis, barmode="group", height=380,
                      margin={"l": 60, "r": 20, "t": 50, "b": 90})
    return fig


def live_figure(draw, **controls):
    """ipywidgets controls that redraw a plotly figure whenever one of them changes (needs a kernel).

    ``draw(**values) -> go.Figure`` is called with the current value of every control; ``controls`` maps the
    keyword names to ipywidgets (sliders, dropdowns). Returns a VBox: the controls in a row, the figure below.
    The static website shows the saved state; the chapters pair each live control with a plotly-slider figure
    that works without a kernel.
    """
    import ipywidgets as widgets
    from IPython.display import display

    out = widgets.Output()

    def redraw(change=None):
        fig = draw(**{name: control.value for name, control in controls.items()})
        out.clear_output(wait=True)
        with out:
            display(fig)

    for control in controls.values():
        control.observe(redraw, names="value")
    redraw()
    return widgets.VBox([widgets.HBox(list(controls.values())), out])


__all__ = ["BookRenderer", "rounded", "FIGURE_DIGITS", "use_book_renderer", "line_figure", "live_figure", "PALETTE"]
