"""scripts/smoke_site.py: what a page promises and when it counts as rendered (no browser needed)."""
import importlib.util
import pathlib
import re
import time
import types

import pytest

pytest.importorskip("playwright")  # which the smoke test drives Chromium with
SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "smoke_site.py"
spec = importlib.util.spec_from_file_location("smoke_site", SCRIPT)
ss = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ss)

DONE = {"math": 0, "typeset": 0, "raw_math": 0, "figures": 0, "undrawn": [], "widgets_rendered": 0,
        "path": "/book/intro.html", "search_hits": 0, "search_summary": ""}


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.setattr(ss, "SITE", tmp_path)
    (tmp_path / "book").mkdir()
    (tmp_path / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=book/intro.html" />')
    (tmp_path / "search.html").write_text('<script src="searchindex.js"></script>')
    (tmp_path / "book" / "intro.html").write_text('<div class="math notranslate nohighlight">\\[x\\]</div>')
    return tmp_path


def test_redirect_must_arrive(site):
    expected = ss.expected_content(site / "index.html")
    assert expected["redirect"] == "/book/intro.html" and not expected["search"]
    assert ss.rendered(DONE, expected)
    assert not ss.rendered({**DONE, "path": "/index.html"}, expected)


def test_search_must_finish(site):
    assert not ss.expected_content(site / "search.html")["search"]  # no query: nothing to wait for
    expected = ss.expected_content(site / "search.html", "q=attention")
    assert expected["search"] and expected["redirect"] is None
    assert not ss.rendered({**DONE, "path": "/search.html"}, expected)
    assert ss.rendered({**DONE, "search_summary": "Search finished, found 3 page(s)", "search_hits": 3}, expected)


def test_math_must_be_typeset(site):
    expected = ss.expected_content(site / "book" / "intro.html")
    assert expected["math"] == 1 and expected["redirect"] is None
    assert not ss.rendered({**DONE, "math": 1}, expected)
    assert ss.rendered({**DONE, "math": 1, "typeset": 1}, expected)


def test_status_page_must_list_every_chapter_once(site):
    assert ss.check_status_page(site) == ["book/status.html is missing (scripts/build_book.py writes it)"]
    (site / "notebooks").mkdir()
    for name in ("01_a.html", "02_b.html"):
        (site / "notebooks" / name).write_text("")
    row = '<tr class="row-odd"><td><p><a class="reference internal" href="../notebooks/{}"><span>x</span></a></p></td>'
    (site / "book" / "status.html").write_text(row.format("01_a.html") + row.format("01_a.html"))
    assert ss.check_status_page(site) == ["status page lists 01_a.html 2 times", "status page lists 02_b.html 0 times"]
    (site / "book" / "status.html").write_text(row.format("01_a.html") + row.format("02_b.html") + "failed: x")
    assert ss.check_status_page(site) == ["status page reports a failed chapter"]
    (site / "book" / "status.html").write_text(row.format("01_a.html") + row.format("02_b.html"))
    assert ss.check_status_page(site) == []


def test_every_page_must_link_the_book_pdf(site):
    menu = '<div class="dropdown dropdown-download-buttons"><ul class="dropdown-menu">{}</ul></div>'
    link = '<li><a href="{}" class="btn btn-sm btn-download-book-pdf-button dropdown-item">book .pdf</a></li>'
    (site / "book" / "intro.html").write_text(menu.format(link.format("../energylab.pdf")))
    (site / "book" / "notation.html").write_text(menu.format(""))
    assert ss.check_book_pdf(site) == ["energylab.pdf is missing or not a PDF (scripts/build_pdf.py makes it)",
                                       "book/notation.html: no link to the book PDF in the download menu"]
    (site / "energylab.pdf").write_bytes(b"%PDF-1.4 " + b"<< /Type /Page >> " * 3 + b"<< /Type /Pages >>")
    (site / "book" / "notation.html").write_text(menu.format(link.format("energylab.pdf")))
    assert ss.check_book_pdf(site, min_pages=4) == ["energylab.pdf has 3 pages, expected at least 4",
                                                    "book/notation.html: the book PDF link points to energylab.pdf"]
    (site / "book" / "notation.html").write_text(menu.format(link.format("../energylab.pdf")))
    assert ss.check_book_pdf(site, min_pages=3) == []


def test_the_sphere_chapter_carries_the_in_page_explorer():
    """The smoke test's JavaScript-vs-Python check runs on the page that has the explorer: chapter 6 must keep it."""
    import json

    nb = json.loads((SCRIPT.parents[1] / "notebooks" / "06_particles_on_spheres.ipynb").read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    assert sum(s.count('<div class="sphere-explorer"></div>') for s in cells) == 1
    assert [case["method"] for case in ss.FLOW_CASES] == ["euler", "rk4", "rk4"] and ss.FLOW_TOL == 1e-6


def test_a_live_figure_must_be_drawn(site):
    (site / "book" / "live.html").write_text('<div class="newton-explorer"></div><div class="hopfield-explorer"></div>')
    expected = ss.expected_content(site / "book" / "live.html")
    assert expected["live"] == {"sphere-explorer": 0, "free-energy-explorer": 0, "hopfield-explorer": 1,
                                "newton-explorer": 1, "sparse-hopfield-explorer": 0}
    assert not ss.rendered(DONE, expected)
    assert not ss.rendered({**DONE, "live_drawn": {"newton-explorer": 1}}, expected)
    assert ss.rendered({**DONE, "live_drawn": {"newton-explorer": 1, "hopfield-explorer": 1}}, expected)


def test_chapters_1_3_and_4_carry_their_live_figures():
    """The smoke test's JavaScript-vs-energylab checks run where the live figures are: chapters 1, 3 and 4 keep one
    each, and chapter 1's starts from the energies the check uses."""
    import json

    for chapter, div in (("01_free_energy", '<div class="free-energy-explorer" data-energies="{}"></div>'.format(
                              ", ".join(f"{e:g}" for e in ss.CHAPTER1_ENERGIES))),
                         ("03_hopfield_memories", '<div class="hopfield-explorer"></div>'),
                         ("04_newton_attention", '<div class="newton-explorer"></div>')):
        nb = json.loads((SCRIPT.parents[1] / "notebooks" / f"{chapter}.ipynb").read_text())
        cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
        assert sum(s.count(div) for s in cells) == 1, chapter
    assert ss.LIVE_TOL == 1e-9
    assert ss.relative_error([1.0, 2.0], [1.0, 2.0 + 2e-9]) == pytest.approx(1e-9 / (1 + 1e-9))
    assert ss.relative_error([1.0], [1.0, 2.0]) == float("inf")  # another shape
    assert ss.relative_error([float("nan")], [1.0]) == float("inf")
    assert ss.js_call("F.f", [1.5, 2], {"a": 0.1}) == 'F.f([1.5, 2], {"a": 0.1})'


def test_chapter_12_carries_its_live_figure_and_what_it_says_of_its_start_can_fail():
    """Chapter 12 keeps the sparse explorer; the smoke test's check of the text's three statements about the figure's
    first state (sparsemax exact in one step, 1.5-entmax not, softmax dense) fails when one of them does not hold."""
    import json

    import torch

    nb = json.loads((SCRIPT.parents[1] / "notebooks" / "12_sparse_hopfield.ipynb").read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    assert sum(s.count('<div class="sparse-hopfield-explorer"></div>') for s in cells) == 1
    assert "sparse-hopfield-explorer" in ss.LIVE_FIGURES
    # three patterns, two of them close: query margin 0.2 for pattern 0, so one sparsemax step is exact iff
    # beta >= 5 and one 1.5-entmax step iff beta >= 10; iterated at beta / 2 = 3 sparsemax rests on {0, 1}
    digits = torch.tensor([[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    start = {"digit": 0, "query": [1.0, 0.0, 0.5]}
    assert ss.explorer_start_problems({**start, "beta": 6.0}, digits) == []
    assert ss.explorer_start_problems({**start, "beta": 4.0}, digits)[0] == (
        "at its start one sparsemax step does not land exactly on the digit")
    assert ss.explorer_start_problems({**start, "beta": 11.0}, digits)[0] == (
        "at its start one 1.5-entmax step already lands exactly on the digit")
    assert "softmax does not spread" in " ".join(ss.explorer_start_problems({**start, "beta": 40.0}, digits))
    assert "ends on a single digit" in " ".join(ss.explorer_start_problems({**start, "beta": 14.0}, digits))


def test_a_sudoku_solver_must_draw_a_prediction(site):
    (site / "book" / "solver.html").write_text('<div class="sudoku-solver" data-models="sudoku4-hyperset"></div>')
    expected = ss.expected_content(site / "book" / "solver.html")
    assert expected["solvers"] == 1
    assert not ss.rendered(DONE, expected)
    assert ss.rendered({**DONE, "solvers_drawn": 1, "first_prediction_ms": [420]}, expected)


def test_chapters_8_and_9_carry_the_sudoku_solver():
    """The smoke test's page-against-torch check runs where a solver is: chapters 8 and 9 keep one each, offering
    only models that energylab.pretrained has."""
    import json
    import re

    from energylab import pretrained

    for chapter in ("08_hyperset", "09_jacobians"):
        nb = json.loads((SCRIPT.parents[1] / "notebooks" / f"{chapter}.ipynb").read_text())
        cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
        found = [m for s in cells for m in re.findall(r'<div class="sudoku-solver" data-models="([^"]+)"></div>', s)]
        assert len(found) == 1, chapter
        assert set(found[0].split(",")) == set(pretrained.names()), chapter
    assert ss.SOLVER_TOL == 1e-4 and ss.SOLVER_BOARDS == 2


def test_clip_check_counts_every_kind_at_both_widths():
    js = ss.CLIP_JS % 0.7
    assert "readingFit(0.7)" in js and ss.CLIP_WIDTHS == (1366, 1920)
    assert ss.KINDS == ("code", "output", "equation", "table")
    for kind in ss.KINDS:
        assert f"{kind}:" in js


def test_pdf_text_check_ignores_wrapping_and_rerun_digits(tmp_path):
    assert ss._squeeze("a = 1 +\n  2  # x") == "a=1+2#x"
    assert ss._squeeze("err 1.2e-05 ok", digits=False) == "err.e-ok"
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": "x = 1\n\ny = 2",
                     "outputs": [{"output_type": "stream", "name": "stdout", "text": "value: 3\n"}]},
                    {"cell_type": "code", "metadata": {"tags": ["remove-input"]}, "source": "hidden", "outputs": []},
                    {"cell_type": "markdown", "metadata": {}, "source": "text"}]}
    path = tmp_path / "01_a.ipynb"
    path.write_text(__import__("json").dumps(nb))
    assert ss._notebook_lines([path]) == [("01_a", "code", "x = 1"), ("01_a", "code", "y = 2"),
                                          ("01_a", "output", "value: 3")]


def test_pgm_reader(tmp_path):
    image = tmp_path / "p.pgm"
    image.write_bytes(b"P5\n# c\n3 2\n255\n" + bytes([0, 128, 255, 1, 2, 3]))
    assert ss._read_pgm(image) == (3, 2, bytes([0, 128, 255, 1, 2, 3]))
    image.write_bytes(b"P6\n3 2\n255\n" + bytes(18))
    with pytest.raises(ValueError, match="PGM"):
        ss._read_pgm(image)


def _page(dpi=30):
    """A white A4 page at ``dpi`` as (width, height, numpy array) to draw on."""
    np = pytest.importorskip("numpy")
    return np.full((int(11.69 * dpi), int(8.27 * dpi)), 255, np.uint8)


def _problems(image):
    return ss.page_problems(image.shape[1], image.shape[0], image.tobytes())


def test_page_check_finds_blank_pages_and_empty_boxes_at_the_bottom():
    page = _page()
    assert _problems(page) == ("blank", 0.0)
    page[30:34, 20:200] = 40  # a paragraph
    assert _problems(page) is None
    bottom = page.shape[0] - 15  # the bottom margin (0.5 in)
    empty = page.copy()
    empty[bottom - 20:bottom, 18:230] = 245  # a tinted frame with nothing in it, reaching the bottom margin
    empty[bottom - 20, 18:230] = 200  # its top border
    kind, height = _problems(empty)
    assert kind == "empty box" and abs(height - 20 / 30) < 0.05
    broken = empty.copy()
    broken[bottom - 12:bottom - 9, 30:150] = 60  # a line of code in it: a box broken after its lines is fine
    assert _problems(broken) is None
    above = page.copy()
    above[200:240, 18:230] = 245  # a tinted box that ends well above the bottom: not a box started too late
    assert _problems(above) is None


def test_every_page_of_a_pdf_is_checked(tmp_path, monkeypatch):
    calls = []

    def fake_run(cmd, check):  # pdftoppm writing three pages, the second blank
        out = pathlib.Path(cmd[-1])
        for n, inked in ((1, True), (2, False), (10, True)):
            image = _page()
            if inked:
                image[40:44, 20:200] = 30
            (out.parent / f"{out.name}-{n:02d}.pgm").write_bytes(
                b"P5\n%d %d\n255\n" % (image.shape[1], image.shape[0]) + image.tobytes())
        calls.append(cmd)

    monkeypatch.setattr(ss.subprocess, "run", fake_run)
    monkeypatch.setattr(ss.shutil, "which", lambda name: "/usr/bin/" + name)
    problems, numbers = ss.check_pdf_pages(tmp_path / "book.pdf")
    assert numbers["pages"] == 3 and numbers["blank"] == 1 and numbers["empty_boxes"] == 0
    assert problems == ["PDF: 1 blank page(s): 2"]
    assert "-f" not in calls[0]  # every page, not a sample


class FakePage:
    """What smoke_site asks of a Playwright page: wait_for_function answers with ``reply`` (or raises it), and the
    handlers registered with ``on``."""
    url = "http://127.0.0.1:1/x.html"

    def __init__(self, reply=None):
        self.reply, self.handlers = reply, {}

    def on(self, event, handler):
        self.handlers[event] = handler

    def wait_for_function(self, expression, timeout):
        if isinstance(self.reply, Exception):
            raise self.reply
        return types.SimpleNamespace(json_value=lambda: self.reply)


def test_an_evaluation_times_out_naming_what_it_asked():
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    assert ss.evaluate(FakePage({"value": "[1.5, 0.1]"}), "f()", "f") == [1.5, 0.1]  # JSON: float64 exactly
    with pytest.raises(ss.ChromiumTimeout, match=r"did not answer the solver's models in 0 s"):
        ss.evaluate(FakePage(PlaywrightTimeout("Timeout 0ms exceeded")), "x", "the solver's models", wait=0)
    with pytest.raises(RuntimeError, match=r"^f: ReferenceError: g is not defined$"):
        ss.evaluate(FakePage({"error": "ReferenceError: g is not defined\n    at f"}), "f()", "f")


def test_a_call_without_a_timeout_of_its_own_is_given_one():
    from playwright.sync_api import Error as PlaywrightError

    with pytest.raises(ss.ChromiumTimeout, match=r"did not answer printing x\.html to PDF in 0 s"):
        with ss.within(0.05, "printing x.html to PDF"):
            time.sleep(0.3)  # the watchdog fired (there is no Chromium of this process to kill)
            raise PlaywrightError("Target page, context or browser has been closed")
    with pytest.raises(PlaywrightError):  # an error of its own is not a timeout
        with ss.within(60, "a resize"):
            raise PlaywrightError("bad size")


def test_what_a_page_does_wrong_is_collected_in_order():
    page = FakePage()
    watch = ss.Watch(page)
    h = page.handlers
    h["request"](types.SimpleNamespace(url="http://127.0.0.1:8000/_static/a.js"))
    h["request"](types.SimpleNamespace(url="data:image/png;base64,AAAA"))
    h["request"](types.SimpleNamespace(url="https://cdn.example.org/mathjax.js"))
    h["load"](page)
    h["websocket"](types.SimpleNamespace(url="wss://example.org/socket"))
    h["pageerror"](types.SimpleNamespace(stack="TypeError: x is undefined\n    at f", name="TypeError", message="..."))
    h["console"](types.SimpleNamespace(type="error", text="boom 42", args=[1, 2], location={"url": "a.js"}))
    h["console"](types.SimpleNamespace(type="warning", text="meh", args=[1], location={}))
    h["console"](types.SimpleNamespace(type="error", text="Failed to load resource: 404", args=[],
                                       location={"url": "http://127.0.0.1:8000/favicon.ico"}))
    h["console"](types.SimpleNamespace(type="error", text="Failed to load resource: 404", args=[],
                                       location={"url": "http://127.0.0.1:8000/_static/b.png"}))
    assert watch.problems[0] == "request to a non-local host: https://cdn.example.org/mathjax.js"
    assert re.fullmatch(r"request to a non-local host: wss://example\.org/socket \(\d\.\d s after the load event\)",
                        watch.problems[1]) or watch.problems[1] == "request to a non-local host: wss://example.org/socket"
    assert watch.problems[2:] == ["uncaught exception: TypeError: x is undefined", "console.error: boom 42",
                                  "browser error: Failed to load resource: 404 http://127.0.0.1:8000/_static/b.png"]


def test_print_css_hides_controls_and_keeps_short_boxes_whole():
    css = (SCRIPT.parents[1] / "book" / "assets" / "css" / "reading.css").read_text()
    printed = css[css.index("@media print"):]
    for selector in (".modebar", ".slider-container", ".updatemenu-container", ".sphere-explorer-controls",
                     ".ss-controls", ".el-controls"):
        assert selector in printed
    assert "div.cell_input, div.cell_output" in printed and "break-inside: avoid" in printed


def test_dark_mode_contrast_check_measures_the_solver_and_redrawn_figures():
    js = ss.DARK_LIVE_JS
    assert ss.MIN_CONTRAST == 4.5 and "< 4.5" in js
    assert "div.sudoku-solver input[type=range]" in js and "div.sphere-explorer input[name=seed]" in js
