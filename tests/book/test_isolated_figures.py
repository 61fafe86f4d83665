"""Figures where each output is drawn alone (issue 54): Colab shows every output in a frame of its own, with no
plotly.js on the page, so the book's renderer there emits a document that loads plotly.js itself; the website and
JupyterLab keep the bundle that draws with the page's plotly.js. The reader notebooks (the Colab buttons' files)
carry such documents for the figures they were saved with."""
import json
import sys
import types

import plotly.graph_objects as go
import plotly.io as pio
import pytest

from energylab import viz
from energylab.notebook import setup
from tests.probes import ROOT, script

CDN = 'src="https://cdn.plot.ly/plotly-'


@pytest.fixture
def colab(monkeypatch):
    """A stand-in for Colab's kernel module, which records the widget manager being switched on."""
    output = types.SimpleNamespace(calls=0)
    output.enable_custom_widget_manager = lambda: setattr(output, "calls", output.calls + 1)
    monkeypatch.setitem(sys.modules, "google.colab", types.SimpleNamespace(output=output))
    monkeypatch.delenv("ENERGYLAB_FIGURES", raising=False)
    yield output
    viz.use_book_renderer(isolated=False)  # the next tests expect the book's renderer


def figure():
    return go.Figure(go.Scatter(x=[1, 2], y=[0.123456789, 4]), layout={"title": "$x^2$", "height": 300})


def test_outside_colab_the_renderer_is_the_websites(monkeypatch):
    monkeypatch.delenv("ENERGYLAB_FIGURES", raising=False)
    assert not viz.in_colab() and viz.use_book_renderer() == viz.RENDERER_NAME == pio.renderers.default
    bundle = pio.renderers[pio.renderers.default].to_mimebundle(figure().to_dict())
    assert set(bundle) == {"application/vnd.plotly.v1+json", "text/html"} and CDN not in bundle["text/html"]


def test_in_colab_every_output_loads_plotly_itself(colab):
    assert viz.use_book_renderer() == viz.ISOLATED_RENDERER_NAME == pio.renderers.default
    bundle = pio.renderers[pio.renderers.default].to_mimebundle(figure().to_dict())
    html = bundle["text/html"]
    assert set(bundle) == {"text/html"} and html.startswith("<!doctype html>") and html.count(CDN) == 1
    assert "mathjax" in html and "Plotly.newPlot" in html and "0.123457" in html and "0.1234567" not in html
    assert 'style="height:300px; width:100%;"' in html
    page = viz.BookRenderer().to_mimebundle(figure().to_dict())["text/html"]  # the same div id as on the website
    div = page.split('id="')[1].split('"')[0]
    assert div.startswith("fig-") and f'id="{div}"' in html
    assert viz.BookRenderer(isolated=True).to_mimebundle(figure().to_dict())["text/html"] == html  # no run noise


def test_the_environment_variable_chooses(colab, monkeypatch):
    monkeypatch.setenv("ENERGYLAB_FIGURES", "page")
    assert viz.use_book_renderer() == viz.RENDERER_NAME
    monkeypatch.delitem(sys.modules, "google.colab")
    monkeypatch.setenv("ENERGYLAB_FIGURES", "isolated")
    assert viz.use_book_renderer() == viz.ISOLATED_RENDERER_NAME
    monkeypatch.setenv("ENERGYLAB_FIGURES", "iframe")
    with pytest.raises(ValueError, match="ENERGYLAB_FIGURES must be 'isolated' or 'page', got 'iframe'"):
        viz.use_book_renderer()


def test_setup_notebook_in_colab_turns_on_its_widget_manager(colab):
    setup.setup_notebook(0, "cpu", profile="quick", profiles=("quick",))
    assert colab.calls == 1 and pio.renderers.default == viz.ISOLATED_RENDERER_NAME
    del sys.modules["google.colab"]
    assert setup.enable_colab_widgets() is False  # elsewhere there is nothing to switch on


def test_reader_notebooks_carry_figures_that_draw_alone(tmp_path):
    reader = script("reader_notebooks")
    source = ROOT / "notebooks" / "10_design_your_own.ipynb"
    nb = reader.convert(source, reader.Book([source], ROOT / "book" / "references.bib"))
    original = json.loads(source.read_text(encoding="utf-8"))
    figures = 0
    for new, old in zip(nb["cells"], original["cells"]):
        if new["cell_type"] != "code":
            continue
        for out_new, out_old in zip(new["outputs"], old["outputs"], strict=True):
            data_new, data_old = out_new.get("data", {}), out_old.get("data", {})
            if reader.PLOTLY_JSON not in data_old:
                assert out_new == out_old
                continue
            figures += 1
            assert data_new[reader.PLOTLY_JSON] == data_old[reader.PLOTLY_JSON]  # JupyterLab draws this one
            html, page = data_new["text/html"], "".join(data_old["text/html"])
            assert CDN not in page and html.count(CDN) == 1 and html.startswith("<!doctype html>")
            assert page.split('id="')[1].split('"')[0] == html.split('<div id="')[1].split('"')[0]
        assert {k: v for k, v in new.items() if k != "outputs"} == {k: v for k, v in old.items() if k != "outputs"}
    assert figures == 2
