"""Sphinx extension for the offline book website: two fixes to what Jupyter Book 1 emits.

1. sphinx-thebe registers its inline config script once per read pass, and Jupyter Book runs two, so pages
   declare ``const THEBE_JS_URL`` twice (a console SyntaxError). Each page keeps one copy of every script.
2. The saved-widget renderer (@jupyter-widgets/html-manager) typesets Output widgets through the MathJax 2 API
   (``MathJax.Hub.Queue``), but the book ships MathJax 3. Once MathJax 3 is ready we add a ``Hub.Queue`` that
   forwards to ``MathJax.typesetPromise``. It also resolves its icon fonts against its own AMD module id
   (``@jupyter-widgets/html-manager/dist/...``, relative to the page); a require.js path maps that id to the local
   copy of the fonts in ``_static/html-manager/``.
3. The single-page build (``--builder singlehtml``, which the book's PDF is printed from) looks up node visitors
   under "singlehtml" and falls back to "html" only when no extension registered any "singlehtml" handler; one
   does, so nodes with only "html" visitors (sphinx-jupyterbook-latex's HiddenCellNode, ...) break that build. We
   copy the missing "html" handlers over.
"""
from __future__ import annotations

MATHJAX2_SHIM = """
window.MathJax = window.MathJax || {};
window.MathJax.startup = {
  ready: function () {
    MathJax.startup.defaultReady();
    MathJax.Hub = {Queue: function () { return MathJax.typesetPromise ? MathJax.typesetPromise() : null; }};
  }
};
""".strip()

WIDGET_ASSETS = """
require.config({paths: {"@jupyter-widgets/html-manager/dist":
  (document.documentElement.dataset.content_root || "") + "_static/html-manager"}});
""".strip()


def _dedupe_and_shim(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        # the same inline script can arrive with filename None or "": compare by file (if any) and attributes
        key = (getattr(script, "filename", None) or "", str(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    from sphinx.builders.html._assets import _JavaScript

    requirejs = [i for i, s in enumerate(unique) if "require.js" in str(s)]
    if requirejs and any("embed-amd" in str(s) for s in unique):
        unique.insert(requirejs[0] + 1, _JavaScript("", body=WIDGET_ASSETS))  # after require.js, before embed-amd
    if any("mathjax" in str(s) for s in unique):
        # inline scripts run before the deferred MathJax bundle, so the startup hook is in place in time
        unique.append(_JavaScript("", body=MATHJAX2_SHIM))
    scripts[:] = unique


def _html_handlers_for_singlehtml(app):
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    single = handlers.setdefault("singlehtml", {})
    for node, visitors in handlers.get("html", {}).items():
        single.setdefault(node, visitors)


def setup(app):
    app.connect("html-page-context", _dedupe_and_shim, priority=900)
    app.connect("builder-inited", _html_handlers_for_singlehtml)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
