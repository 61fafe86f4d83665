// Plotly figures follow the site's light/dark switch (the pydata theme sets <html data-theme="light|dark">).
// The figures are made for a white page; on the dark page their backgrounds go transparent and their text, axis
// lines and grids take light colours. Switching back restores each figure's own layout. Figures drawn later (an
// explorer) are themed when they appear, and a figure its page redraws (Plotly.react after a control changed)
// is themed again after the redraw. scripts/smoke_site.py checks it on a chapter page.
(function () {
  "use strict";
  const DARK = { text: "#ced6dd", grid: "rgba(206, 214, 221, 0.16)", line: "rgba(206, 214, 221, 0.45)" };
  const CLEAR = "rgba(0, 0, 0, 0)";

  const isDark = () => document.documentElement.dataset.theme === "dark";
  const get = (obj, path) => path.split(".").reduce((o, k) => (o == null ? undefined : o[k]), obj);

  // the layout changes that make one figure readable on the dark page
  function darkUpdate(layout) {
    const u = { paper_bgcolor: CLEAR, plot_bgcolor: CLEAR, "font.color": DARK.text, "title.font.color": DARK.text,
                "legend.bgcolor": CLEAR, "legend.font.color": DARK.text };
    for (const a of Object.keys(layout).filter((k) => /^[xy]axis\d*$/.test(k))) {
      Object.assign(u, { [a + ".gridcolor"]: DARK.grid, [a + ".zerolinecolor"]: DARK.line,
                         [a + ".linecolor"]: DARK.line, [a + ".color"]: DARK.text });
    }
    for (const s of Object.keys(layout).filter((k) => /^scene\d*$/.test(k))) {
      for (const a of ["xaxis", "yaxis", "zaxis"]) {
        Object.assign(u, { [`${s}.${a}.gridcolor`]: DARK.grid, [`${s}.${a}.backgroundcolor`]: CLEAR,
                           [`${s}.${a}.color`]: DARK.text });
      }
    }
    return u;
  }

  // whether the figure's layout already carries every dark value (after Plotly.react with a fresh layout it does not)
  const themed = (el, update) => Object.entries(update).every(([k, v]) => get(el.layout, k) === v);

  function theme(el) {
    if (!window.Plotly || !el.layout) return;
    if (!el._themeHooked && el.on) {
      // a figure redrawn by its page (an explorer's or the solver's Plotly.react after a control changed) gets the
      // layout it was made with, the light one: theme it again once drawn
      el._themeHooked = true;
      el.on("plotly_afterplot", () => { if (isDark()) theme(el); });
    }
    if (isDark()) {
      const update = darkUpdate(el.layout);
      if (el.dataset.plotTheme === "dark" && themed(el, update)) return;
      // the figure's own values (null: plotly's default), restored on the light page
      el._lightLayout = Object.fromEntries(Object.keys(update).map((k) => [k, get(el.layout, k) ?? null]));
      el.dataset.plotTheme = "dark";  // set first: relayout redraws, and the observer must not theme it again
      window.Plotly.relayout(el, update);
    } else if (el.dataset.plotTheme === "dark") {
      el.dataset.plotTheme = "light";
      if (el._lightLayout) window.Plotly.relayout(el, el._lightLayout);
    }
  }

  // Nothing runs on a light page, where the figures are drawn as made: the observer of figures drawn later starts
  // the first time the page turns dark (a long page, such as the whole book printed to PDF, pays nothing).
  let pending = false;
  let watching = false;
  function themeAll() {
    if (pending || (!watching && !isDark())) return;
    if (!watching) {
      watching = true;
      new MutationObserver((records) => {
        if (records.some((r) => r.addedNodes.length)) themeAll();
      }).observe(document.body, { childList: true, subtree: true });
    }
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      document.querySelectorAll(".js-plotly-plot").forEach(theme);
    });
  }

  new MutationObserver(themeAll).observe(document.documentElement, { attributes: true,
                                                                     attributeFilter: ["data-theme"] });
  window.addEventListener("load", themeAll);  // a reader whose theme is dark from the start
  window.energylabPlotTheme = { themeAll, darkUpdate };  // for the smoke test
})();
