"""The book as a reader runs it in JupyterLab: a real JupyterLab server, driven in headless Chromium by Playwright.

Chapter 1 (a copy with its outputs cleared, so that every prompt, figure and widget on the page comes from this run
and autosave cannot touch the repository) is opened and run with Run > Run All Cells. Its MyST markup must render
(jupyterlab-myst, requirements.txt): every display equation typeset by KaTeX and numbered (1), (2), ... in order,
``{eq}`` references shown as those numbers, the lemma, proof and theorem as proof boxes, the exercises as exercise
boxes with their solutions collapsed below them, the cited keys shown as text, and no raw ``:label:``, ``{cite}``,
``{eq}``, ``{math}``, ``{prf:...}`` or ``{exercise}`` left anywhere in the rendered markdown. The run itself is
checked in the browser (every prompt numbered, no traceback) and on the server (the saved notebook: execution counts
1..n, no error output).
Then the temperature slider of the live explorer is moved with the keyboard and its Plotly figure must redraw: new
title, higher entropy, different bars. 25 to 55 s on a loaded two-core machine; marked ``jupyterlab``
(pytest -m "not jupyterlab" leaves it out). Screenshots (the chapter around Lemma 1, the boxes, the explorer before
and after the move) are left in the test's temporary directory (printed with -s).
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHAPTER = "01_free_energy.ipynb"  # runs in about 10 s and has the ipywidgets temperature explorer
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
RAW_MYST = (":label:", "{cite}", "{cite:", "{eq}", "{math}", "{prf:", "{exercise}", "{solution}", "{numref}",
            "{ref}", "$$")
TOKEN = "energylab-test"

pytestmark = [pytest.mark.jupyterlab, pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium (Debian: apt-get install chromium)")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _expected(nb: dict) -> dict:
    """What the chapter's MyST source promises the rendered page will show."""
    md = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    directives = re.findall(r"```\{([\w:]+)\}", md)
    return {
        "cells": len(nb["cells"]),
        "code_cells": sum(c["cell_type"] == "code" for c in nb["cells"]),
        # jupyterlab-myst numbers every display equation, labelled ({math}) or not ($$ ... $$)
        "display_math": directives.count("math") + md.count("$$") // 2,
        "inline_math": len(re.findall(r"(?<![$\\])\$[^$\n]+?\$(?!\$)", md)),
        "proofs": sum(d.startswith("prf:") for d in directives),
        "exercises": directives.count("exercise"),
        "solutions": directives.count("solution"),
        "cited": sorted({k.strip() for keys in re.findall(r"\{cite[:\w]*\}`([^`]+)`", md) for k in keys.split(",")}),
        "eq_refs": sorted(set(re.findall(r"\{eq\}`([^`]+)`", md))),
    }


def _api(url: str, timeout: float = 10) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def _wait_kernel_idle(base: str, timeout: float = 60) -> None:
    """The server's one kernel connected and idle (it turns busy for a moment after starting and after a run)."""
    deadline = time.time() + timeout
    while True:
        kernels = _api(f"{base}/api/kernels?token={TOKEN}")
        if [(k["execution_state"], k["connections"] > 0) for k in kernels] == [("idle", True)]:
            return
        assert time.time() < deadline, f"kernel not idle after {timeout} s: {kernels}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    pytest.importorskip("playwright.sync_api")
    pytest.importorskip("jupyterlab")
    pytest.importorskip("jupyterlab_myst")
    work = tmp_path_factory.mktemp("lab")
    nb = json.loads((ROOT / "notebooks" / CHAPTER).read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    nb["metadata"].pop("widgets", None)  # saved widget state would name models this kernel never creates
    (work / "notebook").mkdir()
    (work / "notebook" / CHAPTER).write_text(json.dumps(nb, indent=1))
    # Every cell kept in the DOM (JupyterLab 4 otherwise may draw only the cells in view), so that all of them can be
    # read; settings, workspaces, config and runtime files in the temporary directory, not in the user's home.
    settings = work / "settings" / "@jupyterlab"
    (settings / "notebook-extension").mkdir(parents=True)
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    # and no "get notified about Jupyter news?" toast over the page
    (settings / "apputils-extension").mkdir()
    (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}')
    port = _free_port()
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "JUPYTERLAB_SETTINGS_DIR": str(work / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(work / "workspaces"),
           "JUPYTER_CONFIG_DIR": str(work / "config"), "JUPYTER_RUNTIME_DIR": str(work / "runtime")}
    # the server's log goes to a file: a pipe nobody reads would block the server once it filled up
    log = open(work / "server.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={work / 'notebook'}", "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--ServerApp.allow_root=True"],
        cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                _api(f"{base}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail(f"jupyter lab did not start: {(work / 'server.log').read_text()[-3000:]}")
                time.sleep(0.5)
        yield {"base": base, "work": work, "nb": nb}
    finally:
        # SIGTERM lets the server shut its kernel down; SIGKILL to the whole group if it does not end
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=10)
        log.close()


@contextlib.contextmanager
def _browser_page(shots: pathlib.Path, work: pathlib.Path):
    """A Chromium page at a laptop width for one test; on a failure, a screenshot, the notebook's prompts, the
    status bar and the server log's tail are saved or printed before the error goes on."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"],
                                    timeout=60_000)
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.set_default_timeout(60_000)
        try:
            yield page
        except Exception:
            page.screenshot(path=str(shots / "failure.png"))
            print("prompts:", page.locator(".jp-Notebook .jp-CodeCell .jp-InputPrompt").all_inner_texts())
            print("status bar:", page.locator(".jp-StatusBar-TextItem").all_inner_texts())
            print(f"server log:\n{(work / 'server.log').read_text()[-3000:]}")
            raise
        finally:
            browser.close()


def test_chapter_renders_runs_and_its_slider_redraws(lab):
    base, work, expect = lab["base"], lab["work"], _expected(lab["nb"])
    shots = work / "shots"
    shots.mkdir()
    print(f"\nscreenshots in {shots}")
    with _browser_page(shots, work) as page:
        _run_and_check(page, base, expect, shots)


def _run_and_check(page, base: str, expect: dict, shots: pathlib.Path) -> None:
    page.goto(f"{base}/lab/tree/{CHAPTER}?token={TOKEN}", timeout=90_000)
    # all cells in the DOM and the kernel ready before anything is counted or run (the cells arrive in batches)
    page.wait_for_function("n => document.querySelectorAll('.jp-Notebook .jp-Cell').length === n",
                           arg=expect["cells"], timeout=90_000)
    # The toolbar's indicator reads idle before any kernel exists; the status bar names the kernel once it is
    # connected. Run All clicked before that once left the cells unrun here (prompts empty, kernel idle).
    page.wait_for_function(
        """() => { const s = document.querySelector(".jp-StatusBar-TextItem[title^='Change kernel']");
                   return s !== null && s.textContent.includes("(ipykernel) | Idle"); }""", timeout=90_000)
    _wait_kernel_idle(base)
    assert page.locator(".jp-Notebook .jp-CodeCell").count() == expect["code_cells"]

    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    # done when every code cell's prompt is numbered (they start empty), or as soon as one shows a traceback
    t0 = time.time()
    page.wait_for_function(
        """() => { const p = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')];
                   const error = [...document.querySelectorAll('.jp-OutputArea-output')]
                       .some(e => e.textContent.includes('Traceback (most recent call last)'));
                   return error || (p.length > 0 && p.every(e => /^\\[\\d+\\]/.test(e.textContent.trim()))); }""",
        timeout=150_000)
    errors = [t[:1500] for t in page.locator(".jp-OutputArea-output").all_inner_texts()
              if "Traceback (most recent call last)" in t]
    assert not errors, f"a cell raised:\n{errors[0]}"
    prompts = [t.strip() for t in page.locator(".jp-Notebook .jp-CodeCell .jp-InputPrompt").all_inner_texts()]
    assert prompts == [f"[{i}]:" for i in range(1, expect["code_cells"] + 1)], prompts
    print(f"Run All Cells: {time.time() - t0:.1f} s")

    # The same run as the server sees it: saved through JupyterLab, read back through the contents API.
    page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    deadline, counts = time.time() + 60, None
    while counts != list(range(1, expect["code_cells"] + 1)) and time.time() < deadline:
        time.sleep(1)
        try:  # read while the save is still writing, the file is not yet a notebook (HTTP 400)
            saved = _api(f"{base}/api/contents/{CHAPTER}?content=1&token={TOKEN}")["content"]
        except urllib.error.HTTPError:
            continue
        counts = [c["execution_count"] for c in saved["cells"] if c["cell_type"] == "code"]
    assert counts == list(range(1, expect["code_cells"] + 1)), f"saved execution counts {counts}"
    assert not [o for c in saved["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    _wait_kernel_idle(base)

    # What each markdown cell shows, whatever renders it (its hidden source editor left out); textContent, not
    # innerText, so that the collapsed solutions count too
    texts = page.locator(".jp-MarkdownCell").evaluate_all(
        """els => els.map(el => { const c = el.cloneNode(true);
                                  c.querySelectorAll('.jp-InputArea-editor').forEach(e => e.remove());
                                  return c.textContent; })""")
    assert len(texts) == expect["cells"] - expect["code_cells"]
    raw = [(token, t[max(0, t.find(token) - 40):t.find(token) + 40]) for t in texts for token in RAW_MYST
           if token in t]
    assert not raw, f"MyST shown as raw text: {raw[:5]}"
    # rendered by jupyterlab-myst: each markdown cell shows a .myst widget
    assert page.locator(".jp-MarkdownCell .myst").count() == len(texts)
    md = page.locator(".jp-MarkdownCell .myst")
    assert md.locator(".katex-error").count() == 0, "KaTeX could not typeset some maths"
    assert md.locator(".katex-display").count() == expect["display_math"] > 0
    assert md.locator(".katex").count() >= expect["display_math"] + expect["inline_math"]
    numbers = md.locator("a[aria-label='Link to this Equation']").all_inner_texts()
    assert numbers == [f"({i})" for i in range(1, expect["display_math"] + 1)], numbers
    for label in expect["eq_refs"]:  # {eq} references show the number of the equation they point to
        number = md.locator(f"[id='{label}'] a[aria-label='Link to this Equation']").inner_text()
        refs = md.locator(f"a.hover-link[href='#{label}']").all_inner_texts()
        assert refs and set(refs) == {number}, (label, number, refs)
    proofs = md.locator("aside.myst-proof")
    assert proofs.count() == expect["proofs"] > 0
    assert proofs.first.locator(".myst-proof-title").inner_text().startswith("Lemma 1")
    assert proofs.first.bounding_box()["height"] > 50  # a box with its statement inside, not an empty title
    exercises = md.locator("aside.myst-exercise")
    assert exercises.count() == expect["exercises"] > 0
    titles = [t.split(" (")[0] for t in md.locator("aside .myst-exercise-title").all_inner_texts()]
    assert titles == [f"Exercise {i}" for i in range(1, expect["exercises"] + 1)], titles
    solutions = md.locator("details.myst-exercise")  # collapsed until the reader opens one
    assert solutions.count() == expect["solutions"]
    assert solutions.evaluate_all("ds => ds.filter(d => d.open).length") == 0
    assert " ".join(md.locator("details .myst-exercise-title").all_inner_texts()).replace("\xa0", " ").count(
        "Solution to Exercise") == expect["solutions"]
    text = "\n".join(texts)
    assert all(key in text for key in expect["cited"]), (expect["cited"], "not all shown")
    proofs.first.scroll_into_view_if_needed()
    proofs.first.screenshot(path=str(shots / "lemma.png"))
    page.screenshot(path=str(shots / "chapter.png"))
    exercises.first.scroll_into_view_if_needed()
    exercises.first.screenshot(path=str(shots / "exercise.png"))

    # The live temperature explorer: four keyboard steps of 0.05 in log10 T move T from 1 to about 1.58.
    explorer = page.locator(".jp-OutputArea-output", has=page.locator(".widget-slider")).first
    explorer.scroll_into_view_if_needed()
    title = explorer.locator(".gtitle").first
    title.wait_for()
    before = title.text_content()
    bars_before = explorer.locator(".trace.bars .point path").evaluate_all("ps => ps.map(p => p.getAttribute('d'))")
    assert before.startswith("T = 1,") and len(bars_before) > 1, (before, bars_before)
    explorer.screenshot(path=str(shots / "explorer_before.png"))
    handle = explorer.locator(".noUi-handle").first
    handle.focus()
    for _ in range(4):
        handle.press("ArrowRight")
    # the readout follows the keys at once; the kernel redraws the figure for each value it is sent, so wait for the
    # title of the readout's T (noUiSlider's steps count from the minimum, log10(0.02): T lands near, not on, 10^0.2)
    readout = explorer.locator(".widget-readout").inner_text().strip()
    assert abs(math.log10(float(readout)) - 0.2) < 0.01, readout
    page.wait_for_function(
        "([el, t]) => { const g = el.querySelector('.gtitle'); return g && g.textContent.startsWith(t); }",
        arg=[explorer.element_handle(), f"T = {readout},"], timeout=60_000)
    after = explorer.locator(".gtitle").first.text_content()
    bars_after = explorer.locator(".trace.bars .point path").evaluate_all("ps => ps.map(p => p.getAttribute('d'))")
    explorer.screenshot(path=str(shots / "explorer_after.png"))

    def entropy(title: str) -> float:
        return float(re.search(r"entropy ([\d.]+)", title).group(1))

    assert entropy(after) > entropy(before), (before, after)  # hotter: flatter weights
    assert len(bars_after) == len(bars_before) and bars_after != bars_before


PROSE_CHAPTER = "11_atlas.ipynb"  # its prose quotes computed numbers ({eval}`N.<name>`, energylab.notebook.prose)


def test_prose_numbers_show_before_and_after_a_run(lab):
    """The numbers the text quotes show in JupyterLab as they show on the website: from the values stored in the
    markdown cells when the chapter is opened (no cell run yet), and from the reader's own kernel after Run All."""
    from energylab.notebook import prose

    base, work = lab["base"], lab["work"]
    nb = json.loads((ROOT / "notebooks" / PROSE_CHAPTER).read_text())
    nb["metadata"].pop("widgets", None)
    (work / "notebook" / PROSE_CHAPTER).write_text(json.dumps(nb, indent=1))
    stored = {item["expression"]: item["result"]["data"]["text/plain"]
              for c in nb["cells"] for item in c["metadata"].get("user_expressions", [])}
    assert len(stored) >= 10
    table = prose.table_of(nb)
    with _browser_page(work, work) as page:
        # reset: a fresh workspace, with only this notebook open (the other test left chapter 1 open, and its
        # cells would count too)
        page.goto(f"{base}/lab/tree/{PROSE_CHAPTER}?token={TOKEN}&reset", timeout=90_000)
        page.wait_for_function("n => document.querySelectorAll('.jp-Notebook .jp-Cell').length === n",
                               arg=len(nb["cells"]), timeout=90_000)
        # markdown cells render after the cells arrive (slowly on a loaded machine)
        page.wait_for_function("() => [...document.querySelectorAll('.jp-MarkdownCell .myst')]"
                               ".some(e => e.textContent.includes('instances the paper'))", timeout=90_000)

        def rendered() -> str:
            return "\n".join(page.locator(".jp-Notebook .jp-MarkdownCell .myst").all_inner_texts())

        shown = rendered()
        page.screenshot(path=str(work / "prose-opened.png"))
        assert not re.search(r"\bN\.\w", shown), "a role shown as its source"
        cell = next(c for c in nb["cells"] if "N.gap_median" in "".join(c["source"]))
        sentence = " ".join("".join(cell["source"]).split())
        for expr, text in stored.items():  # the sentence as the reader reads it, values in place
            sentence = sentence.replace(f"{{eval}}`{expr}`", text)
        flat = " ".join(shown.split()).replace("’", "'")
        near = flat[flat.find("instances the paper") - 60:flat.find("instances the paper") + 200]
        assert sentence in flat, f"not rendered with its values: {sentence!r}; shown: {near!r}"
        deadline = time.time() + 90  # this notebook's kernel connected and idle (chapter 1's may still exist)
        while not any(k["execution_state"] == "idle" and k["connections"] > 0
                      for k in _api(f"{base}/api/kernels?token={TOKEN}")):
            assert time.time() < deadline, "no connected idle kernel after 90 s"
            time.sleep(0.5)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        page.wait_for_function(
            """() => { const p = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')];
                       return p.length > 0 && p.every(e => /^\\[\\d+\\]/.test(e.textContent.trim())); }""",
            timeout=150_000)
        page.wait_for_timeout(2000)
        after = " ".join(rendered().split()).replace("’", "'")
        page.screenshot(path=str(work / "prose-after-run.png"))
        assert sentence in after, "Run All changed a quoted number (or left a role unevaluated)"
        assert not re.search(r"\bN\.\w", after) and table["gap_median"] in after
