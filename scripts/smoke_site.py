"""Open every page of the built site in headless Chromium and check what a reader would see.

    python scripts/smoke_site.py [--screenshots DIR] [--settle SECONDS]

It serves _build/html on 127.0.0.1 and opens, in Chromium driven over the DevTools protocol, the site's own
pages (index.html, search.html with a query, genindex.html, ...), the book's pages and every chapter. Once a
page has loaded and rendered, it keeps watching it for --settle seconds (3 by default), so that requests and
errors from timers or lazily loaded code are seen too. A page fails if:
- it throws an exception or logs a console error (or the browser logs an error, e.g. a failed load);
- it requests anything from a host other than 127.0.0.1 (the site must work offline);
- MathJax did not typeset the math (a math element still shows raw TeX, or none was typeset);
- a plotly figure's div holds no drawn SVG;
- a saved widget view was not rendered;
- a live figure (a JavaScript module of book/assets/js that computes in the page: the free-energy, Hopfield and
  Newton explorers of chapters 1, 3 and 4, the sphere explorer of chapter 6) drew nothing, or its functions, run on
  fixed inputs, differ from energylab's in float64 (by more than 1e-9 relative; the sphere flow by more than 1e-6);
- a Sudoku solver (book/assets/js/sudoku_solver.js) drew no prediction, or its JavaScript models' logits differ from
  the torch models of energylab.pretrained by more than 1e-4 at any iteration (the time from navigation to its first
  prediction is printed);
- a redirecting page (index.html) did not arrive where it points, or the search found nothing;
- at a 1366- or a 1920-pixel-wide window, any code cell, output, display equation or table is clipped (wider than
  its box or past the article column; an equation or table may scroll inside a visible frame instead).
Then, without a browser: the status page lists every chapter once with no failure, and every page's download
menu links the whole-book PDF, which exists, shows every line of code and printed output whole (pdftotext), and
on sampled pages, seen as images (pdftoppm), has nothing in its side margins; every page, seen as an image, is
not blank and does not end in an empty framed box.
Exit status 0 when every page passes.
"""
from __future__ import annotations

import argparse
import base64
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

import websocket  # websocket-client

ROOT = pathlib.Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
SEARCH_QUERY = "attention"  # search.html is opened with this query; the book must have matching pages
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                  "--disable-default-apps", "--disable-extensions", "--window-size=1280,2000"]
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
  return JSON.stringify({math: math.length, typeset: document.querySelectorAll('mjx-container').length,
                         raw_math: raw.length, figures: figs.length, undrawn: undrawn.map(e => e.id),
                         widget_views: views, widgets_rendered: rendered, title: document.title,
                         live_drawn: live,
                         solvers_drawn: solvers.filter(el => el.dataset.firstPrediction).length,
                         first_prediction_ms: solvers.map(el => +el.dataset.firstPrediction || 0),
                         path: location.pathname, search_hits: document.querySelectorAll('ul.search li').length,
                         search_summary: (document.querySelector('.search-summary') || {}).textContent || ''});
})()
"""

# Clipped content at a given window width: code (cell inputs and code blocks) and outputs must fit their box (they
# wrap: a horizontal scrollbar counts as clipped); a display equation or a table may instead scroll inside a visible
# frame (class el-scroll-frame, book/assets/js/reading.js), counted apart as "scrolled"; nothing may end past the
# article column's right edge. Collapsed solutions and <details> are opened first: a reader can open them.
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
  out.page = document.documentElement.scrollWidth > window.innerWidth + 1 ? 1 : 0;
  out.column = Math.round(article.getBoundingClientRect().width);
  return JSON.stringify(out);
})()
"""
CLIP_WIDTHS = (1366, 1920)  # a common laptop window and a full-HD one
KINDS = ("code", "output", "equation", "table")


class CDPTimeout(websocket.WebSocketTimeoutException):
    """Chromium did not answer a DevTools command in time; the message says which command and how long it waited
    (a subclass of websocket's timeout, so the checks that let a busy page pass still catch it)."""


class CDP:
    """A minimal DevTools-protocol client: send commands, collect events.

    Sessions set up with ``watch`` also follow their workers and out-of-process frames: each one that starts is
    paused, set up the same way (so its requests and errors are seen from its first line), then resumed."""

    DOMAINS = ("Network", "Runtime", "Log")

    def __init__(self, ws_url: str):
        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []
        self.replies: dict[int, dict] = {}
        self.watched: set[str] = set()
        self._attached: list[str] = []

    def _receive(self) -> dict:
        msg = json.loads(self.ws.recv())
        if "id" in msg:
            self.replies[msg["id"]] = msg
        else:
            self.events.append(msg)
            if msg.get("method") == "Target.attachedToTarget" and msg.get("sessionId") in self.watched:
                self._attached.append(msg["params"]["sessionId"])
        return msg

    def send(self, method: str, session: str | None = None, wait: float = 60, **params):
        """Send a command and return its result, waiting up to ``wait`` seconds for the reply (printing a
        170-page book on a loaded machine takes minutes)."""
        self.next_id += 1
        msg_id = self.next_id
        msg = {"id": msg_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        deadline = time.time() + wait
        while msg_id not in self.replies:
            try:
                self._receive()
            except websocket.WebSocketTimeoutException:
                if time.time() > deadline:
                    raise CDPTimeout(f"Chromium did not answer {method} in {wait:.0f} s") from None
        reply = self.replies.pop(msg_id)
        self._follow()
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def watch(self, session: str, page: bool = False) -> None:
        """Enable the events the checks read on ``session`` and follow the targets it starts. For a page every
        command must succeed; a worker or frame may lack a domain, or be gone already, which is let pass."""
        self.watched.add(session)
        commands = [(f"{domain}.enable", {}) for domain in ("Page",) * page + self.DOMAINS]
        commands.append(("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True}))
        if not page:
            commands.append(("Runtime.runIfWaitingForDebugger", {}))  # it was paused when it started
        for method, params in commands:
            try:
                self.send(method, session, **params)
            except RuntimeError:
                if page:
                    raise

    def _follow(self) -> None:
        while self._attached:
            self.watch(self._attached.pop(0))

    def pump(self, seconds: float, until: str | None = None) -> bool:
        """Collect events for up to ``seconds``; return early (True) once an event named ``until`` arrives."""
        end = time.time() + seconds
        self.ws.settimeout(0.2)
        try:
            while time.time() < end:
                try:
                    event = self._receive()
                except websocket.WebSocketTimeoutException:
                    continue
                self._follow()
                if until and event.get("method") == until:
                    return True
            return False
        finally:
            self.ws.settimeout(60)


def serve(directory: pathlib.Path) -> tuple[http.server.ThreadingHTTPServer, int]:
    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # keep the test log readable
            pass

    handler = functools.partial(QuietHandler, directory=str(directory))
    class QuietServer(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):  # the browser closing a connection early is fine
            pass

    server = QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def chromium() -> str | None:
    """The Chromium executable, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def start_chromium(profile_dir: str) -> tuple[subprocess.Popen, str]:
    exe = chromium()
    if exe is None:
        sys.exit("smoke_site: Chromium not found (Debian: apt-get install chromium)")
    # its own process group, so that stop_chromium ends the renderers and helpers too
    proc = subprocess.Popen([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile_dir}", "--remote-debugging-port=0",
                             "about:blank"], stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 30
    while time.time() < deadline:
        line = proc.stderr.readline()
        match = re.search(r"DevTools listening on (ws://\S+)", line)
        if match:
            return proc, match.group(1)
    stop_chromium(proc)
    sys.exit("smoke_site: Chromium did not start")


def stop_chromium(proc: subprocess.Popen) -> None:
    """Kill Chromium's whole process group and wait for it: a helper still writing into the profile folder made
    its removal fail once, after every page had passed."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


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


def evaluate_checks(cdp: CDP, session: str) -> dict | None:
    """Run CHECK_JS in the page; None while there is no document to ask (e.g. in the middle of a redirect)."""
    try:
        drawn = {name: selector for name, (selector, _) in LIVE_FIGURES.items()}
        reply = cdp.send("Runtime.evaluate", session, expression=CHECK_JS.replace("LIVE_DRAWN", json.dumps(drawn)),
                         returnByValue=True)
        return json.loads(reply["result"]["value"])
    except (RuntimeError, KeyError, TypeError, ValueError, websocket.WebSocketTimeoutException):
        # a page busy for a minute (a software-rendered 3-D scene on a loaded CI machine) is not yet an answer:
        # the caller keeps polling until its own timeout, which reports what was missing
        return None


def check_page(cdp: CDP, url: str, html_file: pathlib.Path, screenshot: pathlib.Path | None,
               timeout: float = 90.0, settle: float = 3.0, pdf: pathlib.Path | None = None,
               width: int | None = None, clip_widths: tuple[int, ...] | None = None,
               clip_counts: dict | None = None, print_only: bool = False) -> list[str]:
    """Open ``url`` in a new tab, wait until it has rendered, and return what a reader would find wrong (empty
    when nothing). With ``pdf``, the rendered page is then printed there (scripts/build_pdf.py); ``width`` sets
    the viewport's width in CSS pixels first (figures are laid out for it). ``clip_widths``: window widths at which
    clipped code, outputs, equations and tables are counted (a problem when any is); the counts are added into
    ``clip_counts`` ({width: {kind: n}}). With ``print_only`` (scripts/build_pdf.py), the page is only waited for
    (loaded, math typeset, figures, live figures and solvers drawn, no error) and printed: the comparisons with
    energylab, the dark-mode and the solver checks are the smoke test's, and printing does not depend on them."""
    target = cdp.send("Target.createTarget", url="about:blank")["targetId"]
    session = cdp.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    cdp.watched.clear()
    cdp.watch(session, page=True)
    if width is not None:
        cdp.send("Emulation.setDeviceMetricsOverride", session, width=width, height=2000, deviceScaleFactor=1,
                 mobile=False)
    cdp.events.clear()
    cdp.send("Page.navigate", session, url=url)
    problems = []
    if not cdp.pump(timeout, until="Page.loadEventFired"):
        problems.append(f"page did not finish loading in {timeout:.0f} s")
    # then wait (polling) until MathJax has typeset, plotly has drawn and widgets have rendered, or time runs out
    expected = expected_content(html_file, urllib.parse.urlparse(url).query)
    deadline = time.time() + timeout
    result = None
    while True:
        result = evaluate_checks(cdp, session) or result
        if (result and rendered(result, expected)) or time.time() > deadline:
            break
        cdp.pump(0.5)
    if result is None:
        result = {"math": 0, "typeset": 0, "raw_math": 0, "figures": 0, "undrawn": [], "widgets_rendered": 0,
                  "path": "?", "search_hits": 0, "search_summary": ""}
        problems.append("the page could not be inspected (no document)")
    # keep watching: a timer, a lazily loaded module or a late widget may still fetch something or fail
    cdp.pump(settle)
    mine = [ev for ev in cdp.events if ev.get("sessionId") in cdp.watched]  # the page, its workers and frames
    load = next((ev["params"]["timestamp"] for ev in mine if ev.get("method") == "Page.loadEventFired"), None)
    for ev in mine:
        method, params = ev.get("method"), ev.get("params", {})
        if method == "Network.requestWillBeSent":
            req_url = params["request"]["url"]
            host = urllib.parse.urlparse(req_url).hostname
            if req_url.startswith(("http", "ws")) and host not in ("127.0.0.1", "localhost"):
                late = params.get("timestamp", 0) - load if load is not None else 0
                problems.append(f"request to a non-local host: {req_url}"
                                + (f" ({late:.1f} s after the load event)" if late > 0 else ""))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            problems.append(f"uncaught exception: {text.splitlines()[0] if text else details}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            problems.append("console.error: " + " ".join(str(a.get("value", a.get("description", "")))
                                                         for a in params.get("args", [])))
        elif (method == "Log.entryAdded" and params["entry"].get("level") == "error"
              # the browser asks for /favicon.ico by itself on a page with no icon link (index.html's redirect)
              and urllib.parse.urlparse(params["entry"].get("url", "")).path != "/favicon.ico"):
            problems.append(f"browser error: {params['entry'].get('text')} {params['entry'].get('url', '')}")
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
        if print_only:
            continue
        started = time.perf_counter()
        problems += LIVE_FIGURES[name][1](cdp, session)
        print(f"  {name}: checked against energylab in {time.perf_counter() - started:.2f} s", flush=True)
    if expected["figures"] and not print_only:
        problems += check_dark_figures(cdp, session)
    if expected.get("solvers"):
        drawn = result.get("solvers_drawn", 0)
        if drawn < expected["solvers"]:
            problems.append(f"sudoku solver: {expected['solvers']} in the page, {drawn} drew a prediction")
        else:
            print(f"  sudoku solver: first prediction {max(result['first_prediction_ms']):.0f} ms after navigation "
                  f"started", flush=True)
        if not print_only:
            problems += check_sudoku_solver(cdp, session)
    if not print_only and (expected.get("solvers") or expected.get("live", {}).get("sphere-explorer")):
        problems += check_dark_live(cdp, session)
    if expected["redirect"] and result["path"] != expected["redirect"]:
        problems.append(f"redirect: should lead to {expected['redirect']}, stayed at {result['path']}")
    if expected["search"] and not result["search_hits"]:
        problems.append(f"search: no results ({result['search_summary'].strip() or 'the search did not finish'})")
    clips = {}
    for clip_width in (clip_widths or ()):
        clips[clip_width] = measure_clipping(cdp, session, clip_width)
        counts = clips[clip_width]["clipped"]
        if sum(counts.values()) or clips[clip_width]["page"]:
            problems.append(f"clipped at {clip_width} px: " + ", ".join(f"{counts[k]} {k}" for k in KINDS)
                            + (", the page scrolls sideways" if clips[clip_width]["page"] else "")
                            + f" (e.g. {'; '.join(clips[clip_width]['examples'][:2])})")
    if clip_widths and width is not None:
        cdp.send("Emulation.setDeviceMetricsOverride", session, width=width, height=2000, deviceScaleFactor=1,
                 mobile=False)
    if screenshot is not None:
        metrics = cdp.send("Page.getLayoutMetrics", session)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": metrics["width"], "height": min(metrics["height"], 16000), "scale": 0.5}
        shot = cdp.send("Page.captureScreenshot", session, format="png", clip=clip, captureBeyondViewport=True)["data"]
        screenshot.write_bytes(base64.b64decode(shot))
    if pdf is not None:
        problems += print_to_pdf(cdp, session, pdf)
    cdp.send("Target.closeTarget", targetId=target)
    for clip_width, clip in clips.items():
        if clip_counts is not None:
            for key in ("clipped", "scrolled", "total"):
                for kind, n in clip[key].items():
                    totals = clip_counts.setdefault(clip_width, {}).setdefault(key, dict.fromkeys(KINDS, 0))
                    totals[kind] += n
    clipped = "  clipped " + "/".join(str(sum(c["clipped"].values())) for c in clips.values()) if clips else ""
    print(f"  {url.split('/', 3)[-1]:45s} math {result['typeset']:4d}  figures {result['figures']:2d}  "
          f"widgets {result['widgets_rendered']:2d}{clipped}  {'OK' if not problems else 'FAIL'}", flush=True)
    return problems


def measure_clipping(cdp: CDP, session: str, width: int, min_scale: float = 0.7, settle: float = 1.0) -> dict:
    """Lay the page out ``width`` CSS pixels wide and count its clipped code, outputs, equations and tables."""
    cdp.send("Emulation.setDeviceMetricsOverride", session, width=width, height=900, deviceScaleFactor=1,
             mobile=False)
    cdp.pump(settle)  # the page refits its equations on resize (reading.js)
    reply = cdp.send("Runtime.evaluate", session, expression=CLIP_JS % min_scale, returnByValue=True)
    return json.loads(reply["result"]["value"])


def page_json(cdp: CDP, session: str, expression: str, wait: float = 60):
    """The value of a JavaScript ``expression`` evaluated in the page, passed back as JSON (float64 numbers round-trip
    exactly); an exception thrown in the page raises RuntimeError."""
    reply = cdp.send("Runtime.evaluate", session, wait=wait, expression=f"JSON.stringify({expression})",
                     returnByValue=True)
    if "exceptionDetails" in reply:
        details = reply["exceptionDetails"]
        raise RuntimeError(details.get("exception", {}).get("description") or details.get("text"))
    return json.loads(reply["result"]["value"])


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


def check_sphere_flow(cdp: CDP, session: str) -> list[str]:
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
        try:
            got = torch.tensor(page_json(cdp, session, expr), dtype=torch.float64)
        except (RuntimeError, KeyError, TypeError, ValueError) as err:
            problems.append(f"sphere explorer: SphereFlow.simulate could not be run ({err})")
            break
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
  return JSON.stringify({before, dark, after: look()});
})()"""


def check_dark_figures(cdp: CDP, session: str) -> list[str]:
    """The page's figures switched to the dark theme and back (problems, empty when fine)."""
    try:
        reply = cdp.send("Runtime.evaluate", session, expression=DARK_FIGURES, awaitPromise=True, returnByValue=True)
        looks = json.loads(reply["result"]["value"])
    except (RuntimeError, KeyError, TypeError, ValueError) as err:
        return [f"dark mode: the figures could not be switched ({err})"]
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
  return JSON.stringify(result);
})()""".replace("%(min)s", str(MIN_CONTRAST))


def check_dark_live(cdp: CDP, session: str) -> list[str]:
    """The solver's text legible in both modes and the redrawn figures on the dark page (problems, empty when
    fine); the lowest contrast ratios are printed."""
    try:
        reply = cdp.send("Runtime.evaluate", session, expression=DARK_LIVE_JS, awaitPromise=True, returnByValue=True,
                         wait=120)
        if "exceptionDetails" in reply:
            details = reply["exceptionDetails"]
            raise RuntimeError(details.get("exception", {}).get("description") or details.get("text"))
        looks = json.loads(reply["result"]["value"])
    except (RuntimeError, KeyError, TypeError, ValueError, websocket.WebSocketTimeoutException) as err:
        return [f"dark mode: the solver and redrawn figures could not be measured ({err})"]
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


# The live figures of chapters 1, 3 and 4 (book/assets/js/free_energy_explorer.js, hopfield_explorer.js,
# newton_explorer.js): their functions, on fixed inputs, against energylab's in float64
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


def check_live_figure(cdp: CDP, session: str, figure: str, calls: list[tuple[str, str, object]]) -> list[str]:
    """Evaluate every JavaScript expression of ``calls`` [(what, expression, energylab's value)] in the page, in one
    evaluation, and compare: a problem for each result further than LIVE_TOL (relative) from energylab's."""
    try:
        results = page_json(cdp, session, "[" + ", ".join(expr for _, expr, _ in calls) + "]")
    except (RuntimeError, KeyError, TypeError, ValueError, websocket.WebSocketTimeoutException) as err:
        return [f"{figure}: its functions could not be run ({err})"]
    problems, worst = [], 0.0
    for (what, _, want), got in zip(calls, results):
        err = relative_error(got, want)
        worst = max(worst, err)
        if err > LIVE_TOL:
            problems.append(f"{figure}: {what} differs from energylab by {err:.2e} relative (> {LIVE_TOL:g})")
    print(f"  {figure}: {len(calls)} results against energylab, max relative error {worst:.1e}", flush=True)
    return problems


def check_free_energy_explorer(cdp: CDP, session: str) -> list[str]:
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
    return check_live_figure(cdp, session, "free-energy-explorer", calls)


def check_hopfield_explorer(cdp: CDP, session: str) -> list[str]:
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
    try:
        page = page_json(cdp, session, "{X: HopfieldExplorer.patterns(), "
                         "queries: [[3, 0.2, 0], [8, 0.35, 5]].map(a => HopfieldExplorer.corrupt(...a))}")
    except (RuntimeError, KeyError, TypeError, ValueError, websocket.WebSocketTimeoutException) as err:
        return [f"hopfield-explorer: its digits could not be read ({err})"]
    digits = torch.tensor(page["X"], dtype=torch.float64)
    for k, query in enumerate(page["queries"]):
        for beta in (2.0, 16.0):
            run = hp.retrieve(torch.tensor([query], dtype=torch.float64), digits, beta, steps=12)
            expr = js_call("HopfieldExplorer.retrieve", query, digits, beta, 12)
            calls += [(f"retrieve(query {k}, digits, {beta}, 12).states", expr + ".states", run.states[:, 0]),
                      (f"retrieve(query {k}, digits, {beta}, 12).energies", expr + ".energies", run.energies[:, 0])]
    return check_live_figure(cdp, session, "hopfield-explorer", calls)


def check_newton_explorer(cdp: CDP, session: str) -> list[str]:
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
    try:
        inst = page_json(cdp, session, "NewtonExplorer.INSTANCE")
    except (RuntimeError, KeyError, TypeError, ValueError, websocket.WebSocketTimeoutException) as err:
        return [f"newton-explorer: its instance could not be read ({err})"]
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
    return check_live_figure(cdp, session, "newton-explorer", calls)


# the live figures: the class of their div, what in the div shows that it is drawn, the check against the library
LIVE_FIGURES = {"sphere-explorer": ("svg.main-svg", check_sphere_flow),
                "free-energy-explorer": ("svg", check_free_energy_explorer),
                "hopfield-explorer": ("svg", check_hopfield_explorer),
                "newton-explorer": ("svg", check_newton_explorer)}


# the page's Sudoku models (book/assets/js/sudoku_solver.js) against torch on fixed boards: two test boards of each
# set and a blank board (as a reader's edit could leave it), every iteration t = 1..4T
SOLVER_BOARDS = 2
SOLVER_TOL = 1e-4  # max |logit difference|: float64 JavaScript over float32 weights against torch's float32


def check_sudoku_solver(cdp: CDP, session: str) -> list[str]:
    """Every model a solver on the page offers, run by the page's SudokuSolver on fixed boards for 4T iterations:
    every iteration's logits within SOLVER_TOL of energylab.pretrained's torch model run in float64, and up to T/2 of
    the float32 model too (and Hyper-SET's two energies within 1e-5 relative of HyperSETLayer.energies)."""
    import torch

    from energylab import pretrained

    problems = []
    try:
        reply = cdp.send("Runtime.evaluate", session, returnByValue=True, expression=(
            "JSON.stringify([...new Set([...document.querySelectorAll('div.sudoku-solver')]"
            ".flatMap(d => (d.dataset.models || '').split(',').map(s => s.trim()).filter(Boolean)))])"))
        names = json.loads(reply["result"]["value"])
    except (RuntimeError, KeyError, TypeError, ValueError, websocket.WebSocketTimeoutException) as err:
        return [f"sudoku solver: could not list its models ({err})"]
    if not names:
        return ["sudoku solver: the page's solvers offer no model"]
    boards = [p.ravel().tolist() for s in ("4x4-id", "4x4-ood") for p in pretrained.boards(s)[0][:SOLVER_BOARDS]]
    tokens = torch.tensor(boards + [[0] * 16])  # (2 SOLVER_BOARDS + 1, 16)
    worst = worst32 = 0.0
    for name in names:
        if name not in pretrained.names():
            problems.append(f"sudoku solver: the page offers {name!r}, which energylab.pretrained does not have")
            continue
        model = pretrained.load(name)
        T = 4 * model.config.iterations
        expr = (f"SudokuSolver.load({json.dumps(name)}).then(m => JSON.stringify("
                f"{json.dumps(tokens.tolist())}.map(b => SudokuSolver.run(m, b, {T}))))")
        try:
            # 4T iterations on 5 boards: well under a second of CPU, but a loaded CI machine may give it little
            reply = cdp.send("Runtime.evaluate", session, wait=300, expression=expr, returnByValue=True,
                             awaitPromise=True)
            out = json.loads(reply["result"]["value"])
        except (RuntimeError, KeyError, TypeError, ValueError, websocket.WebSocketTimeoutException) as err:
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


def print_to_pdf(cdp: CDP, session: str, path: pathlib.Path) -> list[str]:
    """Print the page in ``session`` (A4, backgrounds, the page's print CSS) to ``path``, streamed in chunks; what
    would be clipped on paper (empty when nothing). The page is laid out with its print CSS first, its equations
    fitted to the paper, and its code, outputs, equations and tables counted as for the website (paper cannot
    scroll, so an equation or a table in a scrolling frame counts as clipped)."""
    cdp.send("Emulation.setEmulatedMedia", session, media="print")
    cdp.pump(1.0)
    reply = cdp.send("Runtime.evaluate", session, expression=CLIP_JS % PRINT_MIN_SCALE, returnByValue=True)
    clip = json.loads(reply["result"]["value"])
    problems = []
    if sum(clip["clipped"].values()) + sum(clip["scrolled"].values()):
        problems.append("PDF: clipped on paper: " + ", ".join(
            f"{clip['clipped'][k] + clip['scrolled'][k]} {k}" for k in KINDS)
            + f" (e.g. {'; '.join(clip['examples'][:3])})")
    print("[pdf] laid out for paper: " + ", ".join(f"{clip['clipped'][k] + clip['scrolled'][k]} of "
                                                 f"{clip['total'][k]} {k}" for k in KINDS) + " clipped", flush=True)
    reply = cdp.send("Page.printToPDF", session, wait=PDF_WAIT, paperWidth=8.27, paperHeight=11.69,
                     printBackground=True, marginTop=0.5, marginBottom=0.5, marginLeft=0.5, marginRight=0.5,
                     transferMode="ReturnAsStream")
    with open(path, "wb") as f:
        while True:
            chunk = cdp.send("IO.read", session, wait=PDF_WAIT, handle=reply["stream"], size=1 << 20)
            f.write(base64.b64decode(chunk["data"]) if chunk.get("base64Encoded") else chunk["data"].encode())
            if chunk.get("eof"):
                break
    cdp.send("IO.close", session, handle=reply["stream"])
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
            image = prefix.with_suffix(".pgm")
            width, height, pixels = _read_pgm(image)
            margin = int(MARGIN_IN * 50) - 3  # the margin in pixels, less a little antialiasing
            band = [(y, x) for y in range(margin, height - margin) for x in
                    (*range(0, margin), *range(width - margin, width)) if pixels[y * width + x] < 200]
            if band:
                inked.append(f"page {page + 1} ({len(band)} dark pixels in its side margins)")
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
    import time as _time

    if shutil.which("pdftoppm") is None:
        return ["pdftoppm missing (Debian: apt-get install poppler-utils)"], {}
    started = _time.perf_counter()
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
               "seconds": _time.perf_counter() - started}
    return problems, numbers


def _read_pgm(path: pathlib.Path) -> tuple[int, int, bytes]:
    """A binary (P5, 8-bit) PGM: width, height, pixels."""
    data = path.read_bytes()
    fields, pos = [], 0
    while len(fields) < 4:
        match = re.compile(rb"\s*(#[^\n]*\n\s*)*(\S+)").match(data, pos)
        fields.append(match.group(2))
        pos = match.end()
    if fields[0] != b"P5" or int(fields[3]) > 255:
        raise ValueError(f"{path}: not an 8-bit binary PGM")
    width, height = int(fields[1]), int(fields[2])
    return width, height, data[pos + 1:pos + 1 + width * height]


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
    failures = {}
    clip_counts: dict = {}
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        proc, ws_url = start_chromium(profile)
        try:
            cdp = CDP(ws_url)
            for page in pages:
                path = page.split("?", 1)[0]
                shot = args.screenshots / (pathlib.Path(path).stem + ".png") if args.screenshots else None
                problems = check_page(cdp, f"http://127.0.0.1:{port}/{page}", SITE / path, shot, settle=args.settle,
                                      width=CLIP_WIDTHS[0], clip_widths=CLIP_WIDTHS, clip_counts=clip_counts)
                if problems:
                    failures[page] = problems
        finally:
            stop_chromium(proc)
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
