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

Where each output is drawn alone, in its own frame, no page holds a ``Plotly`` global: Google Colab. There the
renderer emits one self-contained HTML document per figure that loads plotly.js (and MathJax) from plotly's CDN,
as plotly's own Colab renderer does (:func:`isolated_html`); :func:`use_book_renderer` picks it when it finds Colab's
kernel, or when ``ENERGYLAB_FIGURES=isolated`` asks for it. The website and JupyterLab keep the bundle above.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import sys

import plotly.graph_objects as go
import plotly.io as pio
from plotly.io.base_renderers import MimetypeRenderer

RENDERER_NAME = "energylab_book"
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]


class BookRenderer(MimetypeRenderer):
    """Emit the plotly JSON mimetype plus a ``text/html`` div that draws with the page's plotly.js; with
    ``isolated=True``, one ``text/html`` document that loads plotly.js itself (:func:`isolated_html`)."""

    def __init__(self, isolated: bool = False):
        self.isolated = isolated

    def to_mimebundle(self, fig_dict):
        plain = rounded(json.loads(json.dumps(fig_dict, cls=_encoder())))
        fig_json = json.dumps(plain, sort_keys=True)
        div_id = "fig-" + hashlib.sha1(fig_json.encode()).hexdigest()[:12]
        if self.isolated:
            return {"text/html": isolated_html(plain, div_id)}
        html = pio.to_html(
            plain,
            include_plotlyjs=False,
            include_mathjax=False,
            full_html=False,
            div_id=div_id,
            validate=False,
            config=PLOT_CONFIG,
        )
        spec = {"data": plain.get("data", []), "layout": plain.get("layout", {}), "config": {}}
        if plain.get("frames"):  # animations: JupyterLab's play button needs the frames too
            spec["frames"] = plain["frames"]
        return {"application/vnd.plotly.v1+json": spec, "text/html": html}


PLOT_CONFIG = {"displaylogo": False, "responsive": True}


def isolated_html(figure: dict, div_id: str) -> str:
    """A whole HTML document drawing ``figure`` (a plotly figure as a dict, or the spec of a plotly JSON output)
    that fetches plotly.js and MathJax from plotly's CDN itself: for a frame of its own, as Colab gives each output.
    ``div_id`` keeps the output the same from run to run."""
    return pio.to_html(figure, include_plotlyjs="cdn", include_mathjax="cdn", full_html=True, div_id=div_id,
                       validate=False, default_width="100%", default_height=525, config=PLOT_CONFIG)


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


ISOLATED_RENDERER_NAME = "energylab_isolated"


def in_colab() -> bool:
    """Whether this is a Google Colab kernel (it imports ``google.colab`` at start-up)."""
    return "google.colab" in sys.modules


def isolated_outputs() -> bool:
    """Whether each output is drawn in a frame of its own: Colab, or ``ENERGYLAB_FIGURES=isolated`` (a host like
    it); ``ENERGYLAB_FIGURES=page`` forces the website's renderer."""
    asked = os.environ.get("ENERGYLAB_FIGURES", "").strip().lower()
    if asked not in ("", "isolated", "page"):
        raise ValueError(f"ENERGYLAB_FIGURES must be 'isolated' or 'page', got {asked!r}")
    return asked == "isolated" or (asked == "" and in_colab())


def use_book_renderer(isolated: bool | None = None) -> str:
    """Register and select the book renderer (idempotent); return its name. ``isolated`` (default: see
    :func:`isolated_outputs`) selects the one that loads plotly.js in every output."""
    isolated = isolated_outputs() if isolated is None else isolated
    name = ISOLATED_RENDERER_NAME if isolated else RENDERER_NAME
    if name not in pio.renderers:
        pio.renderers[name] = BookRenderer(isolated=isolated)
    pio.renderers.default = name
    pio.templates.default = "plotly_white"
    return name


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


__all__ = ["BookRenderer", "rounded", "FIGURE_DIGITS", "use_book_renderer", "isolated_html", "in_colab",
           "isolated_outputs", "line_figure", "live_figure", "PALETTE"]
