"""The book as a reader runs it in JupyterLab: a real JupyterLab server, driven in headless Chromium by Playwright.

Chapter 1 (a copy, so autosave cannot touch the repository) is opened and run with Run > Run All Cells. Its MyST
markup must render (jupyterlab-myst, requirements.txt): equations typeset, and no raw ``:label:``, ``{cite}``,
``{eq}`` or ``{math}`` text anywhere in the rendered markdown. Then the temperature slider of the live explorer is
moved with the keyboard and its figure must redraw (its title names the new temperature). About a minute on a
loaded two-core machine; marked ``jupyterlab`` (pytest -m "not jupyterlab" leaves it out).
"""
from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHAPTER = "01_free_energy.ipynb"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
RAW_MYST = (":label:", "{cite}", "{eq}", "```{math}", "{prf:", "```{exercise}")

pytestmark = [pytest.mark.jupyterlab,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium (Debian: apt-get install chromium)")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    pytest.importorskip("playwright")
    pytest.importorskip("jupyterlab_myst")
    work = tmp_path_factory.mktemp("lab")
    shutil.copy2(ROOT / "notebooks" / CHAPTER, work / CHAPTER)
    # every cell rendered (JupyterLab 4 otherwise draws only the cells in view), no calls home
    settings = work / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    port, token = _free_port(), "energylab-test"
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(work / "settings"), "PYTHONPATH": str(ROOT),
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--ServerApp.token={token}", f"--ServerApp.root_dir={work}", "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--ServerApp.allow_root=True"],
        cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("jupyter lab did not start in 60 s")
    yield f"{url}/lab/tree/{CHAPTER}?token={token}"
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def test_chapter_renders_runs_and_its_slider_redraws(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            page.goto(lab, timeout=120_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
            code_cells = page.locator(".jp-Notebook .jp-CodeCell").count()
            # every code cell has run: its prompt shows a number, none is queued or running
            page.wait_for_function(
                """n => { const p = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')];
                          return p.length === n && p.every(e => /\\[\\d+\\]/.test(e.textContent)); }""",
                arg=code_cells, timeout=150_000)
            errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
                                  " >> text=Traceback").count()
            assert errors == 0, "a cell raised"

            markdown = page.locator(".jp-MarkdownCell .jp-RenderedMarkdown, .jp-MarkdownCell .jp-RenderedMySTMarkdown")
            texts = markdown.all_inner_texts()
            assert len(texts) == page.locator(".jp-MarkdownCell").count() > 5
            raw = [(token, t[:80]) for t in texts for token in RAW_MYST if token in t]
            assert not raw, f"MyST shown as raw text: {raw[:5]}"
            assert page.locator(".jp-MarkdownCell mjx-container").count() > 20  # the maths is typeset
            assert page.locator(".jp-MarkdownCell", has_text="(1)").count() >= 1  # numbered equations

            explorer = page.locator(".jp-OutputArea-output", has=page.locator(".widget-slider")).first
            explorer.scroll_into_view_if_needed()
            title = explorer.locator(".gtitle").first
            title.wait_for(timeout=60_000)
            before = title.text_content()
            assert before.startswith("T = 1,")
            handle = explorer.locator(".noUi-handle").first
            handle.focus()
            for _ in range(4):  # four steps of 0.05 in log10 T: T = 1 -> 1.58
                handle.press("ArrowRight")
            page.wait_for_function(
                "([el, old]) => { const t = el.querySelector('.gtitle'); return t && t.textContent !== old; }",
                arg=[explorer.element_handle(), before], timeout=60_000)
            after = explorer.locator(".gtitle").first.text_content()
            assert after.startswith("T = 1.58,"), after
        finally:
            browser.close()
