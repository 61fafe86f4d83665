"""Open every page of the built site in headless Chromium and check what a reader would see.

    python scripts/smoke_site.py [--screenshots DIR]

For each page of the book and every chapter it serves _build/html on 127.0.0.1, drives Chromium over the
DevTools protocol and fails if:
- the page throws an exception or logs a console error;
- the page requests anything from a host other than 127.0.0.1 (the site must work offline);
- MathJax did not typeset the math (a math element still shows raw TeX, or none was typeset);
- a plotly figure's div holds no drawn SVG;
- a saved widget view was not rendered.
Exit status 0 when every page passes.
"""
from __future__ import annotations

import argparse
import base64
import functools
import http.server
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import websocket  # websocket-client

ROOT = pathlib.Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
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
  const rendered = document.querySelectorAll('.jupyter-widgets.widget-container, .jupyter-widgets.widget-slider').length;
  return JSON.stringify({math: math.length, typeset: document.querySelectorAll('mjx-container').length,
                         raw_math: raw.length, figures: figs.length, undrawn: undrawn.map(e => e.id),
                         widget_views: views, widgets_rendered: rendered, title: document.title});
})()
"""


class CDP:
    """A minimal DevTools-protocol client: send commands, collect events."""

    def __init__(self, ws_url: str):
        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, session: str | None = None, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def pump(self, seconds: float, until: str | None = None) -> bool:
        """Collect events for up to ``seconds``; return early (True) once an event named ``until`` arrives."""
        end = time.time() + seconds
        self.ws.settimeout(0.2)
        try:
            while time.time() < end:
                try:
                    event = json.loads(self.ws.recv())
                except websocket.WebSocketTimeoutException:
                    continue
                self.events.append(event)
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


def start_chromium(profile_dir: str) -> tuple[subprocess.Popen, str]:
    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if exe is None:
        sys.exit("smoke_site: Chromium not found (Debian: apt-get install chromium)")
    proc = subprocess.Popen([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile_dir}", "--remote-debugging-port=0",
                             "about:blank"], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while time.time() < deadline:
        line = proc.stderr.readline()
        match = re.search(r"DevTools listening on (ws://\S+)", line)
        if match:
            return proc, match.group(1)
    proc.kill()
    sys.exit("smoke_site: Chromium did not start")


def expected_content(html_file: pathlib.Path) -> dict:
    """What the static HTML promises: math elements, plotly figure divs, saved widget views."""
    html = html_file.read_text(encoding="utf-8")
    return {"math": len(re.findall(r'class="math notranslate', html)),
            "figures": len(re.findall(r'<div id="fig-[0-9a-f]{12}"', html)),
            "widget_views": html.count('type="application/vnd.jupyter.widget-view+json"')}


def rendered(result: dict, expected: dict) -> bool:
    return (result["math"] >= expected["math"] and (not expected["math"] or (result["typeset"] and not result["raw_math"]))
            and result["figures"] >= expected["figures"] and not result["undrawn"]
            and (not expected["widget_views"] or result["widgets_rendered"] > 0))


def check_page(cdp: CDP, url: str, html_file: pathlib.Path, screenshot: pathlib.Path | None,
               timeout: float = 90.0) -> list[str]:
    target = cdp.send("Target.createTarget", url="about:blank")["targetId"]
    session = cdp.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    for domain in ("Page", "Network", "Runtime", "Log"):
        cdp.send(f"{domain}.enable", session)
    cdp.events.clear()
    cdp.send("Page.navigate", session, url=url)
    problems = []
    if not cdp.pump(timeout, until="Page.loadEventFired"):
        problems.append(f"page did not finish loading in {timeout:.0f} s")
    # then wait (polling) until MathJax has typeset, plotly has drawn and widgets have rendered, or time runs out
    expected = expected_content(html_file)
    deadline = time.time() + timeout
    while True:
        result = json.loads(cdp.send("Runtime.evaluate", session, expression=CHECK_JS, returnByValue=True)
                            ["result"]["value"])
        if rendered(result, expected) or time.time() > deadline:
            break
        cdp.pump(0.5)
    cdp.pump(1.0)  # late console errors
    for ev in cdp.events:
        if ev.get("sessionId") != session:
            continue
        method, params = ev.get("method"), ev.get("params", {})
        if method == "Network.requestWillBeSent":
            req_url = params["request"]["url"]
            host = urllib.parse.urlparse(req_url).hostname
            if req_url.startswith(("http", "ws")) and host not in ("127.0.0.1", "localhost"):
                problems.append(f"request to a non-local host: {req_url}")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            problems.append(f"uncaught exception: {text.splitlines()[0] if text else details}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            problems.append("console.error: " + " ".join(str(a.get("value", a.get("description", "")))
                                                         for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
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
    if screenshot is not None:
        metrics = cdp.send("Page.getLayoutMetrics", session)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": metrics["width"], "height": min(metrics["height"], 16000), "scale": 0.5}
        shot = cdp.send("Page.captureScreenshot", session, format="png", clip=clip, captureBeyondViewport=True)["data"]
        screenshot.write_bytes(base64.b64decode(shot))
    cdp.send("Target.closeTarget", targetId=target)
    print(f"  {url.split('/', 3)[-1]:45s} math {result['typeset']:4d}  figures {result['figures']:2d}  "
          f"widgets {result['widgets_rendered']:2d}  {'OK' if not problems else 'FAIL'}", flush=True)
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--screenshots", type=pathlib.Path, default=None, help="save a PNG of each page here")
    args = parser.parse_args(argv)
    if not (SITE / "index.html").exists():
        sys.exit("smoke_site: no site at _build/html; build it first (python scripts/build_book.py)")
    # index.html only redirects to book/intro.html; check the real pages: the book's own and every chapter
    pages = sorted(str(p.relative_to(SITE)) for d in ("book", "notebooks") for p in (SITE / d).glob("*.html"))
    if args.screenshots:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    server, port = serve(SITE)
    failures = {}
    with tempfile.TemporaryDirectory() as profile:
        proc, ws_url = start_chromium(profile)
        try:
            cdp = CDP(ws_url)
            for page in pages:
                shot = args.screenshots / (pathlib.Path(page).stem + ".png") if args.screenshots else None
                problems = check_page(cdp, f"http://127.0.0.1:{port}/{page}", SITE / page, shot)
                if problems:
                    failures[page] = problems
        finally:
            proc.kill()
            server.shutdown()
    for page, problems in failures.items():
        print(f"FAIL {page}:")
        for p in dict.fromkeys(problems):
            print(f"   - {p}")
    print(f"smoke_site: {len(pages) - len(failures)} of {len(pages)} pages passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
