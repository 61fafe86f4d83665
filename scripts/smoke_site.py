"""Open every page of the built site in headless Chromium and check what a reader would see.

    python scripts/smoke_site.py [--screenshots DIR] [--settle SECONDS]

It serves _build/html on 127.0.0.1 and opens, in the system's Chromium driven by Playwright, the site's own pages
(index.html, search.html with a query, genindex.html, ...), the book's pages and every chapter. Once a page has
loaded and rendered, it keeps watching it for --settle seconds (3 by default), so that requests and errors from
timers or lazily loaded code are seen too (its frames' and workers' included). A page fails if:
- it throws an exception or logs a console error (or the browser logs an error, e.g. a failed load);
- it requests anything from a host other than 127.0.0.1 (the site must work offline);
- MathJax did not typeset the math (a math element still shows raw TeX, or none was typeset);
- a plotly figure's div holds no drawn SVG, or the figures do not follow the dark theme and back;
- a saved widget view was not rendered;
- a live figure (a JavaScript module of book/assets/js that computes in the page: the free-energy, Hopfield and
  Newton explorers of chapters 1, 3 and 4, the sphere explorer of chapter 6, the sparse Hopfield explorer of
  chapter 12) drew nothing, or its functions, run on
  fixed inputs, differ from energylab's in float64 (by more than 1e-9 relative; the sphere flow by more than 1e-6);
- a Sudoku solver (book/assets/js/sudoku_solver.js) drew no prediction, or its JavaScript models' logits differ from
  the torch models of energylab.pretrained by more than 1e-4 at any iteration (the time from navigation to its first
  prediction is printed), or its text, or a figure a control redraws, is not legible in dark mode (contrast < 4.5);
- a redirecting page (index.html) did not arrive where it points, or the search found nothing;
- at a 1366- or a 1920-pixel-wide window, any code cell, output, display equation or table is clipped (wider than
  its box or past the article column; an equation or table may scroll inside a visible frame instead).
Then, without a browser: the status page lists every chapter once with no failure, and every page's download
menu links the whole-book PDF, which exists, shows every line of code and printed output whole (pdftotext), and
on sampled pages, seen as images (pdftoppm), has nothing in its side margins; every page, seen as an image, is
not blank and does not end in an empty framed box. Anything Chromium does not answer in time fails, naming it.
Exit status 0 when every page passes.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

ROOT = pathlib.Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
SEARCH_QUERY = "attention"  # search.html is opened with this query; the book must have matching pages
MARKER = f"--energylab-smoke-site={os.getpid()}"  # an argument Chromium ignores, to find it by (within())
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-quic", "--disable-default-apps",
                  "--disable-extensions", MARKER]
# Playwright's headless defaults that would change the layout: no scrollbar (a reader's window has one, 15 px of the
# column) and a mouse's hover and pointer media (plotly reads them); left out, pages lay out as in plain Chromium
PLAYWRIGHT_DEFAULTS_LEFT_OUT = ["--hide-scrollbars", "--blink-settings=primaryHoverType=2,availableHoverTypes=2,"
                                "primaryPointerType=4,availablePointerTypes=4"]
CHECK_JS = r"""
(() => {
  const math = [...document.querySelectorAll('div.math, span.math')];
  const raw = math.filter(el => !el.querySelector('mjx-container') && /\\[\[(]|\$\$/.test(el.textContent));
  const figs = [...document.querySelectorAll('div[id^="fig-"]')];
  const undrawn = figs.filter(el => !el.querySelector('svg.main-svg'));
  const views = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length;
  const live = {};  // {class of a live figure's div: how many are drawn}
  for (const [name, drawn] of Object.entries(LIVE_DRAWN))
    live[name] = [...document.querySelectorAll('div.' + name)].filter(el => el.querySelector(drawn)).length;
  const solvers = [...document.querySelectorAll('div.sudoku-solver')];
  const rendered = document.querySelectorAll(
    '.jupyter-widgets.widget-container, .jupyter-widgets.widget-slider').length;
  return {math: math.length, typeset: document.querySelectorAll('mjx-container').length,
          raw_math: raw.length, figures: figs.length, undrawn: undrawn.map(e => e.id),
          widget_views: views, widgets_rendered: rendered, title: document.title, live_drawn: live,
          solvers_drawn: solvers.filter(el => el.dataset.firstPrediction).length,
          first_prediction_ms: solvers.map(el => +el.dataset.firstPrediction || 0),
          path: location.pathname, search_hits: document.querySelectorAll('ul.search li').length,
          search_summary: (document.querySelector('.search-summary') || {}).textContent || ''};
})()
"""

# Clipped content at a given window width: code (cell inputs and code blocks) and outputs must fit their box (they
# wrap: a horizontal scrollbar counts as clipped); a display equation or a table may instead scroll inside a visible
# frame (class el-scroll-frame, book/assets/js/reading.js), counted apart as "scrolled"; nothing may end past the
# article column's right edge. Collapsed solutions and <details> are opened first: a reader can open them. A code
# line the page had to wrap is counted too, a problem from a laptop's width up (the chapters keep 88 columns).
CLIP_JS = r"""
(() => {
  // reveal what a reader can open: collapsed solutions and <details>
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  if (window.readingFit) window.readingFit(%s);  // what the page does when a reader opens them
  const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const right = article.getBoundingClientRect().right;
  const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const inOutput = el => !!el.closest('div.cell_output');
  const groups = {
    code: [...article.querySelectorAll('div.highlight pre')].filter(el => !inOutput(el)),
    output: [...article.querySelectorAll('div.cell_output pre')],
    equation: [...article.querySelectorAll('mjx-container[display="true"]')],
    table: [...article.querySelectorAll('table')],
  };
  const out = {clipped: {}, scrolled: {}, total: {}, examples: []};
  for (const [kind, els] of Object.entries(groups)) {
    let clipped = 0, scrolled = 0, total = 0;
    for (const el of els) {
      if (!el.getClientRects().length) continue;
      total++;
      const box = kind === 'table' ? (el.closest('.pst-scrollable-table-container, .table-wrapper') || el) : el;
      const over = box.scrollWidth > box.clientWidth + 1;
      const beyond = box.getBoundingClientRect().right > right + 1;
      const framed = box.classList.contains('el-scroll-frame') && scrolls(box);
      if (beyond || (over && !((kind === 'equation' || kind === 'table') && framed))) {
        clipped++;
        if (out.examples.length < 5) out.examples.push(`${kind}: ${box.scrollWidth}px in ${box.clientWidth}px: `
          + el.textContent.trim().slice(0, 60));
      } else if (over) scrolled++;
    }
    out.clipped[kind] = clipped; out.scrolled[kind] = scrolled; out.total[kind] = total;
  }
  // code lines the page had to wrap (reading.css hangs their continuation behind a mark): the chapters keep their
  // code within 88 columns so that, at a laptop's width, none is
  out.wrapped_code = 0;
  for (const pre of groups.code) {
    const lh = parseFloat(getComputedStyle(pre).lineHeight);
    if (!pre.getClientRects().length || !lh) continue;
    for (const line of pre.querySelectorAll('.el-line')) {
      if (line.getBoundingClientRect().height > 1.5 * lh) {
        out.wrapped_code++;
        if (out.examples.length < 5) out.examples.push('wrapped code: ' + line.textContent.trim().slice(0, 60));
      }
    }
  }
  out.page = document.documentElement.scrollWidth > window.innerWidth + 1 ? 1 : 0;
  out.column = Math.round(article.getBoundingClientRect().width);
  return out;
})()
"""
CLIP_WIDTHS = (1366, 1920)  # a common laptop window and a full-HD one
KINDS = ("code", "output", "equation", "table")


class ChromiumTimeout(RuntimeError):
    """Chromium did not answer in time; the message says what it was asked and how long it was waited for."""


ERRORS = (PlaywrightError, RuntimeError, KeyError, TypeError, ValueError)  # what a check reports as a problem


def serve(directory: pathlib.Path) -> tuple[http.server.ThreadingHTTPServer, int]:
    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # keep the test log readable
            pass

    class QuietServer(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):  # the browser closing a connection early is fine
            pass

    server = QuietServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(directory)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def chromium() -> str | None:
    """The Chromium executable, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@contextlib.contextmanager
def browser():
    """A context (1280 x 2000 CSS pixels) of the system's headless Chromium, driven by Playwright (no browser is
    downloaded); Chromium is closed on leaving."""
    exe = chromium()
    if exe is None:
        sys.exit("smoke_site: Chromium not found (Debian: apt-get install chromium)")
    with sync_playwright() as playwright:
        try:
            chrome = playwright.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS,
                                                ignore_default_args=PLAYWRIGHT_DEFAULTS_LEFT_OUT)
        except PlaywrightError as err:
            sys.exit(f"smoke_site: Chromium did not start ({str(err).splitlines()[0]})")
        try:
            yield chrome.new_context(viewport={"width": 1280, "height": 2000})
        finally:
            with contextlib.suppress(PlaywrightError):  # killed already by within()
                chrome.close()


@contextlib.contextmanager
def within(seconds: float, what: str):
    """Run the block, for Playwright calls that have no timeout of their own (page.pdf, a resize): if it takes more
    than ``seconds``, this process's Chromium (the one started with MARKER) is killed, which ends the call, and
    ChromiumTimeout is raised naming ``what``."""
    def kill():
        fired.set()
        for cmdline in pathlib.Path("/proc").glob("[0-9]*/cmdline"):
            with contextlib.suppress(OSError):
                if MARKER.encode() in cmdline.read_bytes().split(b"\0"):
                    os.kill(int(cmdline.parent.name), signal.SIGKILL)

    fired, watchdog = threading.Event(), threading.Timer(seconds, kill)
    watchdog.start()
    try:
        yield
    except PlaywrightError:
        if fired.is_set():
            raise ChromiumTimeout(f"Chromium did not answer {what} in {seconds:.0f} s") from None
        raise
    finally:
        watchdog.cancel()


def resize(page, width: int, height: int) -> None:
    """The viewport ``width`` x ``height`` CSS pixels (a page whose thread is stuck never acknowledges it)."""
    with within(60, f"a resize to {width} x {height} px of {page.url}"):
        page.set_viewport_size({"width": width, "height": height})


def evaluate(page, expression: str, what: str, wait: float = 60):
    """The value of the JavaScript ``expression`` in ``page`` (awaited when a promise), passed back as JSON (float64
    numbers round-trip exactly). Raises ChromiumTimeout naming ``what`` if there is no answer in ``wait`` seconds
    (Playwright times the wait, so also when the page's thread is stuck), RuntimeError if the expression throws
    (caught in the page: an uncaught rejection would count as the page's own error)."""
    try:
        handle = page.wait_for_function("async () => { try { return {value: JSON.stringify(await (" + expression
                                        + "\n))}; } catch (e) { return {error: String(e && e.stack || e)}; } }",
                                        timeout=wait * 1000)
    except PlaywrightTimeout:
        raise ChromiumTimeout(f"Chromium did not answer {what} in {wait:.0f} s") from None
    reply = handle.json_value()
    if "error" in reply:
        raise RuntimeError(f"{what}: {reply['error'].splitlines()[0]}")
    return json.loads(reply["value"])


class Watch:
    """What a page does that a reader would see as a fault, in order: requests to a host other than this one,
    uncaught exceptions, console errors and the browser's own errors (a failed load). Playwright reports those of
    the page's frames and workers too."""

    def __init__(self, page):
        self.problems: list[str] = []
        self.loaded: float | None = None
        page.on("load", self.load)
        page.on("request", lambda request: self.request(request.url))
        page.on("websocket", lambda socket: self.request(socket.url))
        page.on("pageerror", self.exception)
        page.on("console", self.console)

    def load(self, *_) -> None:
        self.loaded = self.loaded or time.monotonic()

    def request(self, url: str) -> None:
        if url.startswith(("http", "ws")) and urllib.parse.urlparse(url).hostname not in ("127.0.0.1", "localhost"):
            late = time.monotonic() - self.loaded if self.loaded is not None else 0
            self.problems.append(f"request to a non-local host: {url}"
                                 + (f" ({late:.1f} s after the load event)" if late > 0 else ""))

    def exception(self, err) -> None:
        text = err.stack or (f"{err.name}: {err.message}" if err.name else err.message)
        self.problems.append(f"uncaught exception: {text.splitlines()[0] if text else err}")

    def console(self, msg) -> None:
        url = msg.location.get("url", "")
        if msg.type != "error":
            return
        if msg.args:  # console.error(...) in the page; the browser's own entries have no arguments
            self.problems.append(f"console.error: {msg.text}")
        # the browser asks for /favicon.ico by itself on a page with no icon link (index.html's redirect)
        elif urllib.parse.urlparse(url).path != "/favicon.ico":
            self.problems.append(f"browser error: {msg.text} {url}")


def expected_content(html_file: pathlib.Path, query: str = "") -> dict:
    """What the static HTML (and the URL's query) promises: math elements, plotly figure divs, saved widget views,
    where a meta refresh leads (the page's path once redirected), and whether a search should find pages."""
    html = html_file.read_text(encoding="utf-8")
    refresh = re.search(r'<meta http-equiv="refresh" content="\d+;\s*url=([^"]+)"', html, re.IGNORECASE)
    redirect = None
    if refresh:
        redirect = urllib.parse.urlparse(urllib.parse.urljoin("/" + html_file.relative_to(SITE).as_posix(),
                                                              refresh.group(1))).path
    return {"math": len(re.findall(r'class="math notranslate', html)),
            "figures": len(re.findall(r'<div id="fig-[0-9a-f]{12}"', html)),
            "widget_views": html.count('type="application/vnd.jupyter.widget-view+json"'),
            "live": {name: html.count(f'<div class="{name}"') for name in LIVE_FIGURES},
            "solvers": html.count('<div class="sudoku-solver"'),
            "redirect": redirect,
            "search": "searchindex.js" in html and bool(urllib.parse.parse_qs(query).get("q"))}


def rendered(result: dict, expected: dict) -> bool:
    typeset = not expected["math"] or (result["typeset"] and not result["raw_math"])
    return (result["math"] >= expected["math"] and typeset
            and result["figures"] >= expected["figures"] and not result["undrawn"]
            and (not expected["widget_views"] or result["widgets_rendered"] > 0)
            and all(result.get("live_drawn", {}).get(name, 0) >= n for name, n in expected.get("live", {}).items())
            and result.get("solvers_drawn", 0) >= expected.get("solvers", 0)
            and (not expected["redirect"] or result["path"] == expected["redirect"])
            and (not expected["search"] or result["search_summary"].strip() != ""))  # the search has finished


def guarded(failed: str, check, page) -> list[str]:
    """``check(page)``'s problems, or if it could not be run in the page (an exception, a timeout) ``failed`` and
    why."""
    try:
        return check(page)
    except ERRORS as err:
        return [f"{failed} ({err})"]


def check_page(context, url: str, html_file: pathlib.Path, screenshot: pathlib.Path | None,
               timeout: float = 90.0, settle: float = 3.0, pdf: pathlib.Path | None = None,
               width: int | None = None, clip_widths: tuple[int, ...] | None = None,
               clip_counts: dict | None = None, print_only: bool = False) -> list[str]:
    """Open ``url`` in a new page of ``context`` (browser()), wait until it has rendered, and return what a reader
    would find wrong (empty when nothing). With ``pdf``, the rendered page is then printed there
    (scripts/build_pdf.py); ``width`` sets the viewport's width in CSS pixels first (figures are laid out for it).
    ``clip_widths``: window widths at which clipped code, outputs, equations and tables are counted (a problem when
    any is); the counts are added into ``clip_counts`` ({width: {kind: n}}). With ``print_only``
    (scripts/build_pdf.py), the page is only waited for (loaded, math typeset, figures, live figures and solvers
    drawn, no error) and printed: the comparisons with energylab, the dark-mode and the solver checks are the smoke
    test's, and printing does not depend on them."""
    page = context.new_page()
    if width is not None:
        resize(page, width, 2000)
    watch, problems = Watch(page), []
    try:
        page.goto(url, wait_until="load", timeout=timeout * 1000)
    except PlaywrightTimeout:
        problems.append(f"page did not finish loading in {timeout:.0f} s")
    except PlaywrightError as err:
        problems.append(f"page could not be opened: {str(err).splitlines()[0]}")
    # then wait (polling) until MathJax has typeset, plotly has drawn and widgets have rendered, or time runs out
    expected = expected_content(html_file, urllib.parse.urlparse(url).query)
    checks = CHECK_JS.replace("LIVE_DRAWN", json.dumps({name: drawn for name, (drawn, _) in LIVE_FIGURES.items()}))
    deadline, result = time.time() + timeout, None
    while True:
        # no document (in the middle of a redirect) or a page busy for a minute (a software-rendered 3-D scene on a
        # loaded CI machine) is not yet an answer: polling goes on until the timeout, which reports what is missing
        with contextlib.suppress(*ERRORS):
            result = evaluate(page, checks, "the page's checks", wait=max(1.0, deadline - time.time()))
        if (result and rendered(result, expected)) or time.time() > deadline:
            break
        page.wait_for_timeout(500)
    if result is None:
        result = {"math": 0, "typeset": 0, "raw_math": 0, "figures": 0, "undrawn": [], "widgets_rendered": 0,
                  "path": "?", "search_hits": 0, "search_summary": ""}
        problems.append("the page could not be inspected (no document)")
    # keep watching: a timer, a lazily loaded module or a late widget may still fetch something or fail
    page.wait_for_timeout(settle * 1000)
    problems += watch.problems
    if result["math"] < expected["math"]:
        problems.append(f"page incomplete: {result['math']} of {expected['math']} math elements in the DOM")
    if expected["math"] and (result["raw_math"] or not result["typeset"]):
        problems.append(f"MathJax: {result['raw_math']} of {result['math']} math elements not typeset")
    if result["figures"] < expected["figures"] or result["undrawn"]:
        problems.append(f"plotly: {expected['figures']} figures expected, {result['figures']} found, "
                        f"not drawn: {result['undrawn']}")
    if expected["widget_views"] and not result["widgets_rendered"]:
        problems.append(f"widgets: {expected['widget_views']} saved views, none rendered")
    for name, n in expected.get("live", {}).items():
        if not n:
            continue
        drawn = result.get("live_drawn", {}).get(name, 0)
        if drawn < n:
            problems.append(f"{name}: {n} in the page, {drawn} drawn")
        if not print_only:
            started = time.perf_counter()
            problems += guarded(f"{name}: its functions could not be run", LIVE_FIGURES[name][1], page)
            print(f"  {name}: checked against energylab in {time.perf_counter() - started:.2f} s", flush=True)
    if expected["figures"] and not print_only:
        problems += guarded("dark mode: the figures could not be switched", check_dark_figures, page)
    if expected.get("solvers"):
        drawn = result.get("solvers_drawn", 0)
        if drawn < expected["solvers"]:
            problems.append(f"sudoku solver: {expected['solvers']} in the page, {drawn} drew a prediction")
        else:
            print(f"  sudoku solver: first prediction {max(result['first_prediction_ms']):.0f} ms after navigation "
                  f"started", flush=True)
        if not print_only:
            problems += guarded("sudoku solver: could not be run", check_sudoku_solver, page)
    if not print_only and (expected.get("solvers") or expected.get("live", {}).get("sphere-explorer")):
        problems += guarded("dark mode: the solver and redrawn figures could not be measured", check_dark_live, page)
    if expected["redirect"] and result["path"] != expected["redirect"]:
        problems.append(f"redirect: should lead to {expected['redirect']}, stayed at {result['path']}")
    if expected["search"] and not result["search_hits"]:
        problems.append(f"search: no results ({result['search_summary'].strip() or 'the search did not finish'})")
    clips = {}
    for clip_width in (clip_widths or ()):
        clips[clip_width] = clip = measure_clipping(page, clip_width)
        if sum(clip["clipped"].values()) or clip["page"]:
            problems.append(f"clipped at {clip_width} px: " + ", ".join(f"{clip['clipped'][k]} {k}" for k in KINDS)
                            + (", the page scrolls sideways" if clip["page"] else "")
                            + f" (e.g. {'; '.join(clip['examples'][:2])})")
        if clip_width >= min(CLIP_WIDTHS) and clip["wrapped_code"]:
            problems.append(f"{clip['wrapped_code']} code line(s) wrap at {clip_width} px: keep code within 88 columns "
                            f"(e.g. {'; '.join(e for e in clip['examples'] if e.startswith('wrapped'))[:200]})")
        for key in ("clipped", "scrolled", "total") if clip_counts is not None else ():
            for kind, n in clip[key].items():
                clip_counts.setdefault(clip_width, {}).setdefault(key, dict.fromkeys(KINDS, 0))[kind] += n
    if clip_widths and width is not None:
        resize(page, width, 2000)
    if screenshot is not None:
        size = evaluate(page, "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]",
                        "the page's size")
        page.screenshot(path=screenshot, full_page=True, timeout=timeout * 1000,
                        clip={"x": 0, "y": 0, "width": size[0], "height": min(size[1], 16000)})
    if pdf is not None:
        problems += print_to_pdf(page, pdf)
    with within(60, f"closing {page.url}"):
        page.close()
    clipped = "  clipped " + "/".join(str(sum(c["clipped"].values())) for c in clips.values()) if clips else ""
    print(f"  {url.split('/', 3)[-1]:45s} math {result['typeset']:4d}  figures {result['figures']:2d}  "
          f"widgets {result['widgets_rendered']:2d}{clipped}  {'OK' if not problems else 'FAIL'}", flush=True)
    return problems


def measure_clipping(page, width: int, min_scale: float = 0.7, settle: float = 1.0) -> dict:
    """Lay the page out ``width`` CSS pixels wide and count its clipped code, outputs, equations and tables."""
    resize(page, width, 900)
    page.wait_for_timeout(settle * 1000)  # the page refits its equations on resize (reading.js)
    return evaluate(page, CLIP_JS % min_scale, f"the clipping check at {width} px")


def js_call(function: str, *args) -> str:
    """A JavaScript call of ``function`` on Python values, tensors among them (as nested lists), written as JSON."""
    return f"{function}({', '.join(json.dumps(a, default=lambda t: t.tolist()) for a in args)})"


# fixed starts on which the page's JavaScript integrator (book/assets/js/sphere_flow.js) must reproduce
# energylab.flows.simulate: SA and USA, Euler and RK4, one and several heads
FLOW_CASES = [dict(n=7, d=3, heads=1, preset="symmetric", normalized=True, method="euler", beta=2.0, step=0.1,
                   steps=60),
              dict(n=6, d=4, heads=2, preset="random", normalized=False, method="rk4", beta=1.0, step=0.05, steps=40),
              dict(n=9, d=3, heads=3, preset="antisymmetric", normalized=True, method="rk4", beta=4.0, step=0.1,
                   steps=30)]
FLOW_TOL = 1e-6


def check_sphere_flow(page) -> list[str]:
    """The page's SphereFlow.simulate against energylab.flows.simulate on FLOW_CASES (max |difference| <= 1e-6)."""
    import torch

    from energylab import flows, sphere

    problems = []
    for case in FLOW_CASES:
        x0 = sphere.random_tokens(1, case["n"], case["d"], seed=3)
        w = flows.preset_weights(case["preset"], case["d"], heads=case["heads"], seed=3)
        config = flows.FlowConfig(beta=case["beta"], normalized=case["normalized"], step=case["step"],
                                  steps=case["steps"], method=case["method"])
        want = flows.simulate(x0, w, config).x[:, 0]  # (S, N, d)
        expr = js_call("SphereFlow.simulate", x0[0], {k: getattr(w, k) for k in "QKV"},
                       {k: case[k] for k in ("beta", "normalized", "step", "steps", "method")})
        got = torch.tensor(evaluate(page, expr, "SphereFlow.simulate"), dtype=torch.float64)
        err = float((got - want).abs().max()) if got.shape == want.shape else float("inf")
        if err > FLOW_TOL:
            problems.append(f"sphere explorer: the page's integrator differs from energylab.flows by {err:.2e} "
                            f"(> {FLOW_TOL:g}) on {case}")
    return problems


# The theme's dark mode (book/assets/js/plotly_theme.js): every figure's background clear and its text light on the
# dark page, and each figure's own layout back on the light page.
DARK_FIGURES = """(async () => {
  const plots = [...document.querySelectorAll('.js-plotly-plot')];
  const behind = (el) => {  // the colour the figure is drawn on: the first ancestor with a background
    for (; el; el = el.parentElement) {
      const bg = getComputedStyle(el).backgroundColor;
      if (bg !== 'rgba(0, 0, 0, 0)' && bg !== 'transparent') return bg;
    }
    return getComputedStyle(document.body).backgroundColor;
  };
  const look = () => plots.map((el) => [el._fullLayout.paper_bgcolor, el._fullLayout.font.color,
                                        behind(el.parentElement)]);
  const settle = () => new Promise((done) => setTimeout(done, 400));
  const before = look();
  document.documentElement.dataset.theme = 'dark';
  await settle();
  const dark = look();
  document.documentElement.dataset.theme = 'light';
  await settle();
  return {before, dark, after: look()};
})()"""


def check_dark_figures(page) -> list[str]:
    """The page's figures switched to the dark theme and back (problems, empty when fine)."""
    looks = evaluate(page, DARK_FIGURES, "the dark-mode switch of the figures")
    problems = []
    for i, (paper, font, under) in enumerate(looks["dark"]):
        if paper.replace(" ", "") != "rgba(0,0,0,0)" or font.lower() != "#ced6dd":
            problems.append(f"dark mode: figure {i} keeps background {paper} and text {font} on the dark page")
        rgb = [int(v) for v in re.findall(r"\d+", under)[:3]]
        if len(rgb) < 3 or sum(rgb) > 3 * 128:  # light text needs a dark ground
            problems.append(f"dark mode: figure {i} is drawn on {under}, too light for its light text")
    if looks["after"] != looks["before"]:
        changed = sum(a != b for a, b in zip(looks["after"], looks["before"]))
        problems.append(f"dark mode: {changed} figure(s) did not get their own colours back on the light page")
    return problems


# Legibility in dark mode of what the page draws itself (WCAG contrast ratio, >= 4.5 for text): every digit,
# percentage and label of the Sudoku solver (book/assets/js/sudoku_solver.js), in both modes; and the figures a
# control redraws (the solver's energy chart, chapter 6's sphere explorer), after a control changed on the dark page:
# their background must stay clear (plotly_theme.js themes them again) and their text legible on the page.
MIN_CONTRAST = 4.5
CONTRAST_JS = r"""
const parseColor = (c) => {
  const hex = /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(c || '');
  if (hex) {
    const h = hex[1].length === 3 ? [...hex[1]].map((x) => x + x).join('') : hex[1];
    return [0, 2, 4].map((i) => parseInt(h.slice(i, i + 2), 16)).concat([1]);
  }
  const m = /rgba?\(([^)]+)\)/.exec(c || '');
  if (!m) return c === 'white' ? [255, 255, 255, 1] : null;
  const v = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
  return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1];
};
const over = (top, bottom) => [0, 1, 2].map((i) => top[i] * top[3] + bottom[i] * (1 - top[3])).concat([1]);
const ground = (el) => {  // the opaque colour el is drawn on: its own and its ancestors' backgrounds, composed
  const layers = [];
  for (let e = el; e; e = e.parentElement) {
    const c = parseColor(getComputedStyle(e).backgroundColor);
    if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
  }
  return layers.reverse().reduce((acc, c) => over(c, acc), [255, 255, 255, 1]);
};
const luminance = ([r, g, b]) => {
  const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
};
const contrast = (a, b) => { const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
                             return (x + 0.05) / (y + 0.05); };
const settle = (ms) => new Promise((done) => setTimeout(done, ms));
const solverText = () => {  // [ratio, what] for every element of the solvers that shows text
  const out = [];
  for (const el of document.querySelectorAll('div.sudoku-solver *')) {
    const own = el.tagName === 'INPUT' ? (el.type === 'range' ? '' : el.value)
      : [...el.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent).join('').trim();
    if (!own || !el.getClientRects().length) continue;
    const bg = ground(el), fg = over(parseColor(getComputedStyle(el).color), bg);
    out.push([contrast(fg, bg), `${el.className || el.tagName.toLowerCase()} "${own.slice(0, 12)}" `
              + `rgb(${fg.slice(0, 3).map(Math.round)}) on rgb(${bg.slice(0, 3).map(Math.round)})`]);
  }
  return out;
};
"""
DARK_LIVE_JS = "(async () => {" + CONTRAST_JS + r"""
  const result = {};
  const worst = (list) => list.reduce((a, b) => (b[0] < a[0] ? b : a), [Infinity, '']);
  document.documentElement.dataset.theme = 'light';
  await settle(400);
  const light = solverText();
  document.documentElement.dataset.theme = 'dark';
  await settle(600);
  // a control changed on the dark page: the solver's iterations (to 1: early predictions, wrong cells among them)
  // and the sphere explorer's seed; each redraws its figure with Plotly.react
  for (const s of document.querySelectorAll('div.sudoku-solver input[type=range]')) {
    s.value = 1; s.dispatchEvent(new Event('input'));
  }
  for (const s of document.querySelectorAll('div.sphere-explorer input[name=seed]')) {
    s.value = 3; s.dispatchEvent(new Event('change'));
  }
  const plots = [...document.querySelectorAll(
    'div.sudoku-solver .js-plotly-plot, div.sphere-explorer .js-plotly-plot')];
  for (let k = 0; k < 40 && plots.some((el) => el._fullLayout.paper_bgcolor.replace(/ /g, '') !== 'rgba(0,0,0,0)'); k++)
    await settle(250);
  await settle(300);
  const dark = solverText();
  result.solver = {light: light.length, dark: dark.length, light_min: worst(light), dark_min: worst(dark),
                   wrong: document.querySelectorAll('div.sudoku-solver .ss-wrong').length,
                   failing: dark.concat(light).filter((x) => x[0] < %(min)s).slice(0, 5)};
  result.figures = plots.map((el) => {
    const bg = over(parseColor(el._fullLayout.paper_bgcolor), ground(el.parentElement));
    const fg = over(parseColor(el._fullLayout.font.color) || [68, 68, 68, 1], bg);
    return {where: el.closest('.sudoku-solver') ? 'sudoku solver energy chart' : 'sphere explorer',
            paper: el._fullLayout.paper_bgcolor, ground: `rgb(${bg.slice(0, 3).map(Math.round)})`,
            ratio: contrast(fg, bg), theme: el.dataset.plotTheme};
  });
  document.documentElement.dataset.theme = 'light';
  await settle(400);
  return result;
})()""".replace("%(min)s", str(MIN_CONTRAST))


def check_dark_live(page) -> list[str]:
    """The solver's text legible in both modes and the redrawn figures on the dark page (problems, empty when
    fine); the lowest contrast ratios are printed."""
    looks = evaluate(page, DARK_LIVE_JS, "the dark-mode contrast check", wait=120)
    problems = []
    solver = looks["solver"]
    if solver["light"] or solver["dark"]:
        print(f"  contrast: sudoku solver lowest {solver['light_min'][0]:.2f} light ({solver['light_min'][1]}), "
              f"{solver['dark_min'][0]:.2f} dark ({solver['dark_min'][1]}); {solver['dark']} texts, "
              f"{solver['wrong']} wrong cells", flush=True)
        for ratio, what in solver["failing"]:
            problems.append(f"sudoku solver: contrast {ratio:.2f} < {MIN_CONTRAST} for {what}")
    for fig in looks["figures"]:
        print(f"  contrast: {fig['where']} redrawn on the dark page: text {fig['ratio']:.2f} on {fig['ground']} "
              f"(paper {fig['paper']})", flush=True)
        if fig["paper"].replace(" ", "") != "rgba(0,0,0,0)" or fig["ratio"] < MIN_CONTRAST:
            problems.append(f"dark mode: the {fig['where']} redrawn after a control changed has background "
                            f"{fig['paper']} (on {fig['ground']}), text contrast {fig['ratio']:.2f}")
    return problems


# The live figures of chapters 1, 3, 4 and 12 (book/assets/js/free_energy_explorer.js, hopfield_explorer.js,
# newton_explorer.js, sparse_hopfield_explorer.js): their functions, on fixed inputs, against energylab's in float64
LIVE_TOL = 1e-9
# chapter 1's six token energies (section 1.4, to three decimals, as its figure's div carries them) and its T range
CHAPTER1_ENERGIES = [0.643, 0.837, 1.813, 2.571, 2.636, 3.756]
TEMPERATURES = (0.02, 0.3, 1.0, 7.0, 50.0)


def relative_error(got, want) -> float:
    """max |got − want| / max |want| over all entries: the error relative to the result's scale (inf when the shapes
    differ or the page returned anything not finite)."""
    import torch

    got, want = torch.as_tensor(got, dtype=torch.float64), torch.as_tensor(want, dtype=torch.float64)
    if got.shape != want.shape or not torch.isfinite(got).all():
        return float("inf")
    return float((got - want).abs().max() / want.abs().max().clamp_min(1e-300))


def check_live_figure(page, figure: str, calls: list[tuple[str, str, object]]) -> list[str]:
    """Evaluate every JavaScript expression of ``calls`` [(what, expression, energylab's value)] in the page, in one
    evaluation, and compare: a problem for each result further than LIVE_TOL (relative) from energylab's."""
    results = evaluate(page, "[" + ", ".join(expr for _, expr, _ in calls) + "]", f"{figure}'s functions")
    problems, worst = [], 0.0
    for (what, _, want), got in zip(calls, results):
        err = relative_error(got, want)
        worst = max(worst, err)
        if err > LIVE_TOL:
            problems.append(f"{figure}: {what} differs from energylab by {err:.2e} relative (> {LIVE_TOL:g})")
    print(f"  {figure}: {len(calls)} results against energylab, max relative error {worst:.1e}", flush=True)
    return problems


def check_free_energy_explorer(page) -> list[str]:
    """FreeEnergyExplorer's weights, F* and F(p) against energylab.forms.free_energy: chapter 1's energies and random
    ones, over the figure's range of T, F(p) at the Boltzmann weights and at weights with a zero entry."""
    import torch

    from energylab.forms import free_energy as fe

    g = torch.Generator().manual_seed(0)
    calls = []
    chapter = torch.tensor(CHAPTER1_ENERGIES, dtype=torch.float64)
    for E in (chapter, 3 * torch.randn(9, generator=g, dtype=torch.float64)):
        q = torch.rand(E.numel(), generator=g, dtype=torch.float64)
        q[0] = 0.0  # 0 log 0 = 0
        q /= q.sum()
        for T in TEMPERATURES:
            p = fe.boltzmann_weights(E, T)
            calls += [(f"weights(E, {T})", js_call("FreeEnergyExplorer.weights", E, T), p),
                      (f"helmholtz(E, {T})", js_call("FreeEnergyExplorer.helmholtz", E, T),
                       fe.helmholtz_free_energy(E, T)),
                      (f"freeEnergyOfWeights(p*, E, {T})", js_call("FreeEnergyExplorer.freeEnergyOfWeights", p, E, T),
                       fe.free_energy_of_weights(p, E, T)),
                      (f"freeEnergyOfWeights(q, E, {T})", js_call("FreeEnergyExplorer.freeEnergyOfWeights", q, E, T),
                       fe.free_energy_of_weights(q, E, T))]
    return check_live_figure(page, "free-energy-explorer", calls)


def check_hopfield_explorer(page) -> list[str]:
    """HopfieldExplorer's energy, step and retrieve against energylab.forms.hopfield and
    energylab.experiments.hopfield.retrieve: random patterns and states at three β, and the page's own digits with
    its corrupted queries (as the figure draws them), retrieved for 12 steps."""
    import torch

    from energylab.experiments import hopfield as hp
    from energylab.forms import hopfield

    g = torch.Generator().manual_seed(0)
    X, xi = torch.randn(7, 12, generator=g, dtype=torch.float64), torch.randn(12, generator=g, dtype=torch.float64)
    calls = []
    for beta in (0.5, 4.0, 40.0):
        calls += [(f"energy(xi, X, {beta})", js_call("HopfieldExplorer.energy", xi, X, beta),
                   hopfield.hopfield_energy(xi, X, beta)),
                  (f"step(xi, X, {beta})", js_call("HopfieldExplorer.step", xi, X, beta),
                   xi + hopfield.hopfield_update(xi, X, beta))]
    page_digits = evaluate(page, "{X: HopfieldExplorer.patterns(), "
                           "queries: [[3, 0.2, 0], [8, 0.35, 5]].map(a => HopfieldExplorer.corrupt(...a))}",
                           "HopfieldExplorer's digits")
    digits = torch.tensor(page_digits["X"], dtype=torch.float64)
    for k, query in enumerate(page_digits["queries"]):
        for beta in (2.0, 16.0):
            run = hp.retrieve(torch.tensor([query], dtype=torch.float64), digits, beta, steps=12)
            expr = js_call("HopfieldExplorer.retrieve", query, digits, beta, 12)
            calls += [(f"retrieve(query {k}, digits, {beta}, 12).states", expr + ".states", run.states[:, 0]),
                      (f"retrieve(query {k}, digits, {beta}, 12).energies", expr + ".energies", run.energies[:, 0])]
    return check_live_figure(page, "hopfield-explorer", calls)


def check_sparse_hopfield_explorer(page) -> list[str]:
    """SparseHopfieldExplorer's maps, energy, step and retrieve against energylab.forms.sparse_hopfield: random scores
    at three scales (the sparse maps one-hot, sparse and dense), random patterns and states at three β, and the page's
    own digits with its corrupted queries, iterated for 12 steps by every map, and the query margin."""
    import torch

    from energylab.forms import sparse_hopfield as sh

    g = torch.Generator().manual_seed(0)
    library = {"softmax": sh.softmax, "sparsemax": sh.sparsemax, "entmax15": sh.entmax15,
               "normmax": lambda t: sh.normmax(t, 2.0)}
    alpha = {"normmax": 2.0}
    calls = []
    for scale in (0.3, 3.0, 30.0):
        theta = scale * torch.randn(11, generator=g, dtype=torch.float64)
        calls += [(f"map(theta * {scale}, {kind})", js_call("SparseHopfieldExplorer.map", theta, kind), f(theta))
                  for kind, f in library.items()]
    X, xi = torch.randn(7, 12, generator=g, dtype=torch.float64), torch.randn(12, generator=g, dtype=torch.float64)
    for kind in library:
        for beta in (0.5, 4.0, 40.0):
            a = alpha.get(kind)
            calls += [(f"energy(xi, X, {beta}, {kind})", js_call("SparseHopfieldExplorer.energy", xi, X, beta, kind),
                       sh.fy_hopfield_energy(xi, X, beta, kind, a)),
                      (f"step(xi, X, {beta}, {kind})", js_call("SparseHopfieldExplorer.step", xi, X, beta, kind),
                       xi + sh.fy_hopfield_update(xi, X, beta, kind, a))]
    page_digits = evaluate(page, "{X: HopfieldExplorer.patterns(), "
                           "queries: [[3, 0.2, 0], [8, 0.35, 5]].map(a => HopfieldExplorer.corrupt(...a))}",
                           "SparseHopfieldExplorer's digits")
    digits = torch.tensor(page_digits["X"], dtype=torch.float64)
    for k, query in enumerate(page_digits["queries"]):
        q = torch.tensor(query, dtype=torch.float64)
        target = torch.tensor([[3, 8][k]])
        calls.append((f"queryMargin(query {k})", js_call("SparseHopfieldExplorer.queryMargin", q, digits, [3, 8][k]),
                      sh.query_margin(q[None], digits, target)[0]))
        for kind in library:
            for beta in (2.0, 16.0):
                states, energies, state = [q], [], q
                for _ in range(12):
                    state = state + sh.fy_hopfield_update(state, digits, beta, kind, alpha.get(kind))
                    states.append(state)
                energies = [sh.fy_hopfield_energy(s, digits, beta, kind, alpha.get(kind)) for s in states]
                expr = js_call("SparseHopfieldExplorer.retrieve", q, digits, beta, kind, 12)
                calls += [(f"retrieve(query {k}, digits, {beta}, {kind}, 12).states", expr + ".states",
                           torch.stack(states)),
                          (f"retrieve(query {k}, digits, {beta}, {kind}, 12).energies", expr + ".energies",
                           torch.stack(energies))]
    problems = check_live_figure(page, "sparse-hopfield-explorer", calls)
    # chapter 12 says where the figure starts: one sparsemax step lands on the digit, one 1.5-entmax step does not
    start = evaluate(page, "(d => ({...d, query: HopfieldExplorer.corrupt(d.digit, d.flip, d.seed)}))"
                     "(SparseHopfieldExplorer.DEFAULTS)", "SparseHopfieldExplorer.DEFAULTS")
    problems += [f"sparse-hopfield-explorer: {p}" for p in explorer_start_problems(start, digits)]
    return problems


def explorer_start_problems(start: dict, digits) -> list[str]:
    """What chapter 12 says of its live figure's first state (the page's query and β in ``start``) that does not hold
    for the patterns ``digits``: sparsemax's one step exact, 1.5-entmax's not (but at twice the β), softmax's weights
    on every digit, and at half the β sparsemax run to rest on a set of digits."""
    import torch

    from energylab.forms import sparse_hopfield as sh

    query = torch.tensor(start["query"], dtype=torch.float64)
    theta = start["beta"] * digits @ query
    target = torch.nn.functional.one_hot(torch.tensor(start["digit"]), len(digits)).to(theta.dtype)
    problems = []
    if not torch.equal(sh.sparsemax(theta), target):
        problems.append("at its start one sparsemax step does not land exactly on the digit")
    if torch.equal(sh.entmax15(theta), target):
        problems.append("at its start one 1.5-entmax step already lands exactly on the digit")
    if not bool((sh.softmax(theta) > 0.01).all()):
        problems.append("at its start softmax does not spread weight over every digit")
    if not torch.equal(sh.entmax15(2 * theta), target):
        problems.append("at twice its β one 1.5-entmax step does not land exactly on the digit")
    state = query  # at half its β sparsemax, run to rest (the figure's 40 steps), rests on a set of digits
    for _ in range(40):
        state = digits.T @ sh.sparsemax(start["beta"] / 2 * digits @ state)
    if int((sh.sparsemax(start["beta"] / 2 * digits @ state) > 0).sum()) < 2:
        problems.append("at half its β sparsemax run to rest ends on a single digit, not on a set")
    return problems


def check_newton_explorer(page) -> list[str]:
    """NewtonExplorer's F*, gradient and Newton directions and trajectories against energylab.forms.free_energy,
    energylab.forms.newton and energylab.descent.descend: a random instance in d = 3 (the catalog's att2nd sampler)
    and the figure's own instance in the plane, with the figure's default step and another."""
    import torch

    from energylab import catalog
    from energylab.descent import descend
    from energylab.forms import free_energy as fe
    from energylab.forms import newton

    updates = {"gradient": fe.softmax_free_energy_update, "newton": newton.att2nd_update}
    zs, params = catalog.FORMS["att2nd"].sample(6, 3, generator=torch.Generator().manual_seed(0))
    H, W, T = params["H"], params["W"], float(params["T"])
    calls = []
    for k, z in enumerate(zs):
        calls += [(f"freeEnergy(z{k})", js_call("NewtonExplorer.freeEnergy", z, H, W, T),
                   fe.softmax_free_energy(z, H, W, T)),
                  (f"gradientDirection(z{k})", js_call("NewtonExplorer.gradientDirection", z, H, W, T),
                   fe.softmax_free_energy_update(z, H, W, T)),
                  (f"newtonDirection(z{k})", js_call("NewtonExplorer.newtonDirection", z, H, W, T),
                   newton.att2nd_update(z, H, W, T))]
    inst = evaluate(page, "NewtonExplorer.INSTANCE", "NewtonExplorer's instance")
    H2, W2, z0 = (torch.tensor(inst[k], dtype=torch.float64) for k in ("H", "W", "z0"))
    runs = [(zs[0], H, W, T, 0.5, 8), (z0, H2, W2, inst["T"], 1.0, 30), (z0, H2, W2, 0.8, 0.5, 30)]
    for start, H_, W_, T_, eta, steps in runs:
        for method, update in updates.items():
            run = descend(lambda z: update(z, H_, W_, T_), lambda z: fe.softmax_free_energy(z, H_, W_, T_), start,
                          eta, steps)
            expr = js_call("NewtonExplorer.descend", start, H_, W_, T_, eta, steps, method)
            calls += [(f"descend({method}, d = {start.numel()}, T = {T_}, eta = {eta}).states", expr + ".states",
                       run.states),
                      (f"descend({method}, d = {start.numel()}, T = {T_}, eta = {eta}).energies", expr + ".energies",
                       run.energies)]
    return check_live_figure(page, "newton-explorer", calls)


# the live figures: the class of their div, what in the div shows that it is drawn, the check against the library
LIVE_FIGURES = {"sphere-explorer": ("svg.main-svg", check_sphere_flow),
                "free-energy-explorer": ("svg", check_free_energy_explorer),
                "hopfield-explorer": ("svg", check_hopfield_explorer),
                "newton-explorer": ("svg", check_newton_explorer),
                "sparse-hopfield-explorer": ("svg", check_sparse_hopfield_explorer)}


# the page's Sudoku models (book/assets/js/sudoku_solver.js) against torch on fixed boards: two test boards of each
# set and a blank board (as a reader's edit could leave it), every iteration t = 1..4T
SOLVER_BOARDS = 2
SOLVER_TOL = 1e-4  # max |logit difference|: float64 JavaScript over float32 weights against torch's float32


def check_sudoku_solver(page) -> list[str]:
    """Every model a solver on the page offers, run by the page's SudokuSolver on fixed boards for 4T iterations:
    every iteration's logits within SOLVER_TOL of energylab.pretrained's torch model run in float64, and up to T/2 of
    the float32 model too (and Hyper-SET's two energies within 1e-5 relative of HyperSETLayer.energies)."""
    import torch

    from energylab import pretrained

    names = evaluate(page, "[...new Set([...document.querySelectorAll('div.sudoku-solver')].flatMap(d => "
                     "(d.dataset.models || '').split(',').map(s => s.trim()).filter(Boolean)))]", "the solvers' models")
    if not names:
        return ["sudoku solver: the page's solvers offer no model"]
    boards = [p.ravel().tolist() for s in ("4x4-id", "4x4-ood") for p in pretrained.boards(s)[0][:SOLVER_BOARDS]]
    tokens = torch.tensor(boards + [[0] * 16])  # (2 SOLVER_BOARDS + 1, 16)
    problems, worst, worst32 = [], 0.0, 0.0
    for name in names:
        if name not in pretrained.names():
            problems.append(f"sudoku solver: the page offers {name!r}, which energylab.pretrained does not have")
            continue
        model = pretrained.load(name)
        T = 4 * model.config.iterations
        expr = (f"SudokuSolver.load({json.dumps(name)}).then(m => "
                f"{json.dumps(tokens.tolist())}.map(b => SudokuSolver.run(m, b, {T})))")
        try:  # 4T iterations on 5 boards: well under a second of CPU, but a loaded CI machine may give it little
            out = evaluate(page, expr, f"SudokuSolver.run for {name}", wait=300)
        except ERRORS as err:
            problems.append(f"sudoku solver: SudokuSolver.run could not be run for {name} ({err})")
            continue
        got = torch.tensor([o["logits"] for o in out], dtype=torch.float64)  # (B, T, N, n)
        # the reference: the torch model in float64 (the page's arithmetic; the float32 model's own rounding grows
        # along the iterations, to 1.5e-3 at 4T for Hyper-SET), and the float32 model up to T/2
        want = pretrained.logits_along(pretrained.as_float64(model), tokens, T)
        want32 = pretrained.logits_along(model, tokens, T // 8).double()
        err = float((got - want).abs().max()) if got.shape == want.shape else float("inf")
        err32 = float((got[:, :T // 8] - want32).abs().max()) if got.shape == want.shape else float("inf")
        worst, worst32 = max(worst, err), max(worst32, err32)
        if max(err, err32) > SOLVER_TOL:
            problems.append(f"sudoku solver: {name}'s logits in the page differ from torch's by {err:.2e} "
                            f"(float64, t = 1..{T}) and {err32:.2e} (float32, t <= {T // 8}), > {SOLVER_TOL:g}")
        with torch.no_grad():
            if model.config.layer == "hyperset":
                _, states = model(tokens, T, return_states=True)
                xs = [model.inputs(tokens)] + states
                for key in ("attention", "feedforward"):
                    e = torch.stack([model.layer.energies(x)[key] for x in xs], 1).double()
                    g = torch.tensor([o["energies"][key] for o in out], dtype=torch.float64)
                    rel = float(((g - e).abs() / e.abs()).max()) if g.shape == e.shape else float("inf")
                    if rel > 1e-5:
                        problems.append(f"sudoku solver: {name}'s {key} energy in the page differs from torch's "
                                        f"by {rel:.2e} relative")
    print(f"  sudoku solver: {', '.join(names)}: max |logit difference| to torch {worst:.1e} (float64, every "
          f"iteration up to 4T) and {worst32:.1e} (float32, up to T/2) on {len(tokens)} boards", flush=True)
    return problems


PDF_WAIT = 900  # seconds for Chromium to lay out and print the single-page book (about 200 s on two busy cores)
PRINT_MIN_SCALE = 0.4  # the smallest font scale for a display equation on paper (book/assets/js/reading.js)


def print_to_pdf(page, path: pathlib.Path) -> list[str]:
    """Print ``page`` (A4, backgrounds, the page's print CSS) to ``path``; what would be clipped on paper (empty
    when nothing). The page is laid out with its print CSS first, its equations fitted to the paper, and its code,
    outputs, equations and tables counted as for the website (paper cannot scroll, so an equation or a table in a
    scrolling frame counts as clipped). ChromiumTimeout if printing takes more than PDF_WAIT seconds."""
    with within(60, f"the print media of {page.url}"):
        page.emulate_media(media="print")
    page.wait_for_timeout(1000)
    clip = evaluate(page, CLIP_JS % PRINT_MIN_SCALE, "the clipping check on paper")
    problems = []
    if sum(clip["clipped"].values()) + sum(clip["scrolled"].values()):
        problems.append("PDF: clipped on paper: " + ", ".join(
            f"{clip['clipped'][k] + clip['scrolled'][k]} {k}" for k in KINDS)
            + f" (e.g. {'; '.join(clip['examples'][:3])})")
    print("[pdf] laid out for paper: " + ", ".join(f"{clip['clipped'][k] + clip['scrolled'][k]} of "
                                                 f"{clip['total'][k]} {k}" for k in KINDS) + " clipped", flush=True)
    with within(PDF_WAIT, f"printing {page.url} to PDF"):  # tagged: Chromium's default, which page.pdf turns off
        page.pdf(path=path, width="8.27in", height="11.69in", print_background=True, tagged=True,
                 margin=dict.fromkeys(("top", "bottom", "left", "right"), "0.5in"))
    return problems


def pdf_pages(path: pathlib.Path) -> int:
    """Pages of a PDF Chromium printed (its page objects), without a PDF library."""
    return len(re.findall(rb"/Type\s*/Page[^s]", path.read_bytes()))


def check_book_pdf(site: pathlib.Path, min_pages: int = 20) -> list[str]:
    """Every page with a download menu links the whole-book PDF, which exists and is a PDF of >= min_pages."""
    pdf = site / "energylab.pdf"
    problems = []
    if not pdf.exists() or not pdf.read_bytes().startswith(b"%PDF-"):
        problems.append("energylab.pdf is missing or not a PDF (scripts/build_pdf.py makes it)")
    else:
        pages = pdf_pages(pdf)
        if pages < min_pages:
            problems.append(f"energylab.pdf has {pages} pages, expected at least {min_pages}")
    for html_file in sorted(site.rglob("*.html")):
        html = html_file.read_text(encoding="utf-8")
        if 'dropdown-download-buttons' not in html:
            continue
        link = re.search(r'<a href="([^"]+)"[^>]*btn-download-book-pdf-button', html)
        rel = html_file.relative_to(site).as_posix()
        if link is None:
            problems.append(f"{rel}: no link to the book PDF in the download menu")
        elif (html_file.parent / link.group(1)).resolve() != pdf.resolve():
            problems.append(f"{rel}: the book PDF link points to {link.group(1)}")
        if html_file.parent.name == "notebooks":
            problems += check_chapter_pdf(html_file, html, rel)
    return problems


def check_chapter_pdf(html_file: pathlib.Path, html: str, rel: str) -> list[str]:
    """A chapter page links its own PDF (scripts/build_pdf.py cuts it out of the book's): a PDF whose first page
    starts with the chapter's title."""
    link = re.search(r'<a href="([^"]+)"[^>]*btn-download-chapter-pdf-button', html)
    if link is None:
        return [f"{rel}: no link to the chapter's PDF in the download menu"]
    own = (html_file.parent / link.group(1)).resolve()
    if not own.exists() or not own.read_bytes().startswith(b"%PDF-"):
        return [f"{rel}: the chapter PDF {link.group(1)} is missing or not a PDF"]
    title = re.search(r"<h1[^>]*>(.*?)</h1>", html, flags=re.DOTALL)
    words = re.sub(r"<[^>]+>|#|¶", " ", title.group(1) if title else "").split()[:4]
    first = subprocess.run(["pdftotext", "-f", "1", "-l", "1", str(own), "-"], capture_output=True,
                           text=True).stdout
    if not words or _squeeze(" ".join(words)) not in _squeeze(first):
        return [f"{rel}: the chapter PDF's first page does not start the chapter ({' '.join(words)!r})"]
    return []


PDF_SAMPLES = 6  # pages of the PDF rendered as images and checked (the widest code first)
MARGIN_IN = 0.5  # the printed margins (print_to_pdf)


def _squeeze(text: str, digits: bool = True) -> str:
    """Text without whitespace (a wrapped line is a line still), optionally without digits (re-executed outputs)."""
    text = re.sub(r"\s+", "", text)
    return re.sub(r"\d+", "", text) if not digits else text


def _notebook_lines(notebooks: list[pathlib.Path]) -> list[tuple[str, str, str]]:
    """(chapter, kind, line) for every non-blank line of every code cell and every stream output."""
    lines = []
    for path in notebooks:
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            if cell["cell_type"] != "code" or {"remove-cell", "remove-input"} & set(cell["metadata"].get("tags", [])):
                continue
            src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            lines += [(path.stem, "code", line) for line in src.splitlines() if line.strip()]
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream" and out.get("name") == "stdout":
                    text = out["text"] if isinstance(out["text"], str) else "".join(out["text"])
                    lines += [(path.stem, "output", line) for line in text.splitlines() if line.strip()]
    return lines


def check_pdf_content(pdf: pathlib.Path, notebooks: list[pathlib.Path], images: pathlib.Path | None = None,
                      samples: int = PDF_SAMPLES) -> tuple[list[str], dict]:
    """The PDF shows every code line and every printed output line whole, and nothing crosses into the margins.

    Text (pdftotext): each non-blank line of every chapter's code cells must appear in the PDF's text, whitespace
    ignored (a line cut at the margin loses its end); output lines likewise, digits ignored too (CI re-executes
    the chapters). Images (pdftoppm, 50 dpi): on the pages that carry the longest code lines and a spread of
    others, the left and right margins must be blank: a line, an equation, a scrollbar or a box edge in them
    is content that did not fit. Returns (problems, numbers)."""
    import numpy as np

    problems = []
    tools = {name: shutil.which(name) for name in ("pdftotext", "pdftoppm")}
    if None in tools.values():
        return ["pdftotext/pdftoppm missing (Debian: apt-get install poppler-utils)"], {}
    pages_text = subprocess.run([tools["pdftotext"], "-layout", str(pdf), "-"], capture_output=True, text=True,
                                check=True).stdout.split("\f")
    # a wrapped line's continuation carries the "↪" mark of reading.css: drop it before looking lines up
    text = "".join(pages_text).replace("\u21aa", "")
    whole, whole_nd = _squeeze(text), _squeeze(text, digits=False)
    missing = {"code": [], "output": []}
    lines = _notebook_lines(notebooks)
    for chapter, kind, line in lines:
        if kind == "code" and _squeeze(line) not in whole:
            missing[kind].append(f"{chapter}: {line.strip()[:70]}")
        elif kind == "output" and _squeeze(line, digits=False) not in whole_nd:
            missing[kind].append(f"{chapter}: {line.strip()[:70]}")
    for kind, items in missing.items():
        if items:
            problems.append(f"PDF: {len(items)} {kind} line(s) not found whole, e.g. {items[:3]}")
    # pages to look at: those holding the longest code lines, then evenly spread ones
    longest = sorted((line for _, kind, line in lines if kind == "code"), key=len, reverse=True)
    chosen: list[int] = []
    for line in longest:
        head = _squeeze(line)[:40]
        page = next((i for i, t in enumerate(pages_text) if head and head in _squeeze(t)), None)
        if page is not None and page not in chosen:
            chosen.append(page)
        if len(chosen) >= samples // 2:
            break
    n_pages = len(pages_text) - (1 if pages_text and not pages_text[-1].strip() else 0)
    chosen += [i for i in range(0, n_pages, max(1, n_pages // (samples - len(chosen) + 1)))[1:] if i not in chosen]
    chosen = sorted(chosen[:samples])
    inked = []
    with tempfile.TemporaryDirectory() as tmp:
        for page in chosen:
            prefix = pathlib.Path(tmp) / f"p{page + 1}"
            subprocess.run([tools["pdftoppm"], "-f", str(page + 1), "-l", str(page + 1), "-r", "50", "-gray",
                            "-singlefile", str(pdf), str(prefix)], check=True)
            width, height, pixels = _read_pgm(prefix.with_suffix(".pgm"))
            margin = int(MARGIN_IN * 50) - 3  # the margin in pixels, less a little antialiasing
            rows = np.frombuffer(pixels, np.uint8).reshape(height, width)[margin:height - margin]
            dark = int((rows[:, :margin] < 200).sum() + (rows[:, width - margin:] < 200).sum())
            if dark:
                inked.append(f"page {page + 1} ({dark} dark pixels in its side margins)")
            if images is not None:
                images.mkdir(parents=True, exist_ok=True)
                subprocess.run([tools["pdftoppm"], "-f", str(page + 1), "-l", str(page + 1), "-r", "80", "-png",
                                "-singlefile", str(pdf), str(images / f"pdf-page-{page + 1}")], check=True)
    if inked:
        problems.append(f"PDF: content in the margins of {', '.join(inked)}")
    numbers = {"code_lines": sum(k == "code" for _, k, _ in lines),
               "output_lines": sum(k == "output" for _, k, _ in lines),
               "missing_code": len(missing["code"]), "missing_output": len(missing["output"]),
               "pages_checked": [p + 1 for p in chosen], "pages_inked": len(inked)}
    return problems, numbers


PAGE_DPI = 30  # every page of the PDF is seen as an image at this resolution (check_pdf_pages)
EMPTY_BOX_IN = 0.12  # a frame at least this tall at a page's bottom with nothing in it is an empty box
BLANK_ROWS = 2  # a page with at most this many rows of pixels not white (at PAGE_DPI) is blank


def page_problems(width: int, height: int, pixels: bytes, dpi: int = PAGE_DPI) -> tuple[str, float] | None:
    """What is wrong with one printed page seen as an 8-bit grey image: ("blank", 0) for a page with nothing on it,
    ("empty box", its height in inches) for a framed box that reaches the page's bottom margin with nothing in it
    (a code box whose frame started on this page while its first line moved to the next); None when fine.

    Inside the printed margins, the rows at the bottom of the content are read upwards: a box's row is tinted
    (< 252) across at least half the column, its interior (less 3 pixels of frame at either side) holds no ink
    (< 170: text is darker, a frame's tint and border are lighter). Text in them ends the box: a box broken after
    its lines, which is fine. A white row above them is where the box started: the box was empty."""
    import numpy as np

    image = np.frombuffer(pixels, np.uint8)[:width * height].reshape(height, width)
    margin = int(MARGIN_IN * dpi) - 2
    content = image[margin:height - margin, margin:width - margin]
    rows = np.nonzero((content < 250).any(axis=1))[0]
    if len(rows) <= BLANK_ROWS:
        return ("blank", 0.0)
    last = y = int(rows[-1])
    if content.shape[0] - 1 - last > 0.15 * dpi:  # the content ends above the bottom margin: no box runs on
        return None
    while y >= 0:
        tinted = np.nonzero(content[y] < 252)[0]
        if len(tinted) < 0.5 * content.shape[1]:
            break
        if (content[y, tinted[0] + 3:tinted[-1] - 2] < 170).any():
            return None
        y -= 1
    height_in = (last - y) / dpi
    return ("empty box", height_in) if height_in >= EMPTY_BOX_IN else None


def check_pdf_pages(pdf: pathlib.Path, dpi: int = PAGE_DPI) -> tuple[list[str], dict]:
    """Every page of ``pdf`` rendered as an image (pdftoppm, grey, ``dpi``) and checked by page_problems: no page
    blank, no page ending in an empty framed box. Returns (problems naming the pages, numbers)."""
    if shutil.which("pdftoppm") is None:
        return ["pdftoppm missing (Debian: apt-get install poppler-utils)"], {}
    started = time.perf_counter()
    empty, blank = [], []
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["pdftoppm", "-r", str(dpi), "-gray", str(pdf), str(pathlib.Path(tmp) / "p")], check=True)
        images = sorted(pathlib.Path(tmp).glob("p-*.pgm"), key=lambda f: int(f.stem.split("-")[1]))
        for image in images:
            number = int(image.stem.split("-")[1])
            found = page_problems(*_read_pgm(image), dpi=dpi)
            if found and found[0] == "blank":
                blank.append(number)
            elif found:
                empty.append((number, found[1]))
    problems = []
    if empty:
        problems.append(f"PDF: {len(empty)} page(s) end in an empty framed box: "
                        + ", ".join(f"page {n} ({h:.1f} in)" for n, h in empty))
    if blank:
        problems.append(f"PDF: {len(blank)} blank page(s): {', '.join(map(str, blank))}")
    numbers = {"pages": len(images), "empty_boxes": len(empty), "blank": len(blank),
               "seconds": time.perf_counter() - started}
    return problems, numbers


def _read_pgm(path: pathlib.Path) -> tuple[int, int, bytes]:
    """A binary (P5, 8-bit) PGM: width, height, pixels."""
    data = path.read_bytes()
    field = rb"\s+(?:#[^\n]*\n\s*)*(\d+)"  # whitespace, perhaps comments, a number
    head = re.match(rb"P5" + field * 3 + rb"\s", data)
    if head is None or int(head.group(3)) > 255:
        raise ValueError(f"{path}: not an 8-bit binary PGM")
    width, height = int(head.group(1)), int(head.group(2))
    return width, height, data[head.end():head.end() + width * height]


def check_status_page(site: pathlib.Path) -> list[str]:
    """The execution status page lists every chapter once, with no failed run (problems, empty when fine)."""
    page = site / "book" / "status.html"
    if not page.exists():
        return ["book/status.html is missing (scripts/build_book.py writes it)"]
    html = page.read_text(encoding="utf-8")
    chapters = sorted(p.name for p in (site / "notebooks").glob("*.html"))
    row = r'<tr[^>]*>\s*<td[^>]*><p><a class="reference internal" href="../notebooks/([^"#]+\.html)'
    listed = re.findall(row, html)
    problems = [f"status page lists {name} {listed.count(name)} times" for name in chapters if listed.count(name) != 1]
    problems += [f"status page lists a chapter that is not on the site: {n}" for n in set(listed) - set(chapters)]
    if "failed: " in html:
        problems.append("status page reports a failed chapter")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--screenshots", type=pathlib.Path, default=None, help="save a PNG of each page here")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="seconds to keep watching each page for requests and errors once it has rendered")
    args = parser.parse_args(argv)
    if not (SITE / "index.html").exists():
        sys.exit("smoke_site: no site at _build/html; build it first (python scripts/build_book.py)")
    # the site's own pages (index.html redirects to book/intro.html; search.html runs a search), the book's, chapters
    top = sorted((p.name for p in SITE.glob("*.html")), key=lambda n: (n != "index.html", n))
    top = [f"{n}?q={urllib.parse.quote(SEARCH_QUERY)}" if n == "search.html" else n for n in top]
    pages = top + sorted(str(p.relative_to(SITE)) for d in ("book", "notebooks") for p in (SITE / d).glob("*.html"))
    if args.screenshots:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    server, port = serve(SITE)
    failures, clip_counts = {}, {}
    try:
        with browser() as context:
            for page in pages:
                path = page.split("?", 1)[0]
                shot = args.screenshots / (pathlib.Path(path).stem + ".png") if args.screenshots else None
                problems = check_page(context, f"http://127.0.0.1:{port}/{page}", SITE / path, shot,
                                      settle=args.settle, width=CLIP_WIDTHS[0], clip_widths=CLIP_WIDTHS,
                                      clip_counts=clip_counts)
                if problems:
                    failures[page] = problems
    finally:
        server.shutdown()
    pdf_problems, pdf_numbers = [], {}
    if (SITE / "energylab.pdf").exists():
        pdf_problems, pdf_numbers = check_pdf_content(SITE / "energylab.pdf",
                                                      sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")),
                                                      images=args.screenshots)
        page_problems, page_numbers = check_pdf_pages(SITE / "energylab.pdf")
        pdf_problems += page_problems
        pdf_numbers.update({f"every_page_{k}": v for k, v in page_numbers.items()})
    for name, problems in (("book/status.html (content)", check_status_page(SITE)),
                           ("energylab.pdf (the whole book)", check_book_pdf(SITE) + pdf_problems)):
        if problems:
            failures[name] = problems
    for page, problems in failures.items():
        print(f"FAIL {page}:")
        for p in dict.fromkeys(problems):
            print(f"   - {p}")
    for clip_width, counts in clip_counts.items():
        print(f"clipped at {clip_width} px: " + ", ".join(f"{counts['clipped'][k]} of {counts['total'][k]} {k}"
                                                         for k in KINDS)
              + "; in a scrolling frame: " + ", ".join(f"{counts['scrolled'][k]} {k}" for k in KINDS))
    if pdf_numbers:
        print(f"PDF: {pdf_numbers['code_lines'] - pdf_numbers['missing_code']} of {pdf_numbers['code_lines']} code "
              f"lines and {pdf_numbers['output_lines'] - pdf_numbers['missing_output']} of "
              f"{pdf_numbers['output_lines']} output lines found whole; pages {pdf_numbers['pages_checked']} seen "
              f"as images, {pdf_numbers['pages_inked']} with content in the margins")
    print(f"smoke_site: {len(pages) - len(failures)} of {len(pages)} pages passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
