/* What the book's live figures share (free_energy_explorer.js, hopfield_explorer.js, newton_explorer.js and
 * sphere_flow.js's generator): float64 numerics written as energylab writes them (logsumexp and softmax shifted by
 * the max, as torch computes them; a linear solve with partial pivoting), a seeded generator, and plain-SVG drawing
 * (axes, curves, bars, images) with controls, in the site's colours: axes and text take currentColor and the theme's
 * CSS variables, so a figure reads in light and in dark mode. No dependencies; nothing here needs a kernel.
 *
 * The figures' pure functions are what the site's smoke test (scripts/smoke_site.py) runs on fixed inputs against
 * energylab in float64, so what a reader sees is computed by code that is checked.
 */
(function () {
  "use strict";

  // ------------------------------------------------------------------ numerics (float64)
  const dot = (a, b) => a.reduce((s, ai, k) => s + ai * b[k], 0);
  const matvec = (M, x) => M.map((row) => dot(row, x));
  const sum = (a) => a.reduce((s, v) => s + v, 0);

  /* log Σ exp(x_i), shifted by the max (torch.logsumexp); -Infinity for an empty or all -Infinity x. */
  function logsumexp(x) {
    const m = Math.max(...x);
    if (!Number.isFinite(m)) return m;
    return m + Math.log(sum(x.map((v) => Math.exp(v - m))));
  }

  /* softmax(x) = exp(x - max) / Σ exp(x - max) (torch.softmax). */
  function softmax(x) {
    const m = Math.max(...x), e = x.map((v) => Math.exp(v - m)), z = sum(e);
    return e.map((v) => v / z);
  }

  /* A⁻¹b for a square A (nested arrays), by Gaussian elimination with partial pivoting (LU, as torch.linalg.solve). */
  function solve(A, b) {
    const n = b.length, M = A.map((row, i) => [...row, b[i]]);
    for (let c = 0; c < n; c++) {
      let p = c;
      for (let r = c + 1; r < n; r++) if (Math.abs(M[r][c]) > Math.abs(M[p][c])) p = r;
      [M[c], M[p]] = [M[p], M[c]];
      for (let r = c + 1; r < n; r++) {
        const f = M[r][c] / M[c][c];
        for (let k = c; k <= n; k++) M[r][k] -= f * M[c][k];
      }
    }
    const x = new Array(n).fill(0);
    for (let r = n - 1; r >= 0; r--) {
      let s = M[r][n];
      for (let k = r + 1; k < n; k++) s -= M[r][k] * x[k];
      x[r] = s / M[r][r];
    }
    return x;
  }

  /* A seeded generator: mulberry32 for uniforms in [0, 1), Box-Muller for standard normals. */
  function rng(seed) {
    let a = seed >>> 0;
    const uniform = () => {
      a = (a + 0x6D2B79F5) >>> 0;
      let t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    return { uniform, normal: () => Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform()) };
  }

  // ------------------------------------------------------------------ page elements
  const SVG_NS = "http://www.w3.org/2000/svg";
  const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"];  // energylab.viz.PALETTE, as the figures

  function svg(tag, attrs, parent) {
    const el = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
    if (parent) parent.append(el);
    return el;
  }

  function html(tag, props, parent) {
    const el = Object.assign(document.createElement(tag), props || {});
    if (parent) parent.append(el);
    return el;
  }

  const STYLE = `
.el-explorer { border: 1px solid var(--pst-color-border, #ccc); border-radius: 6px; padding: 0.8em; margin: 1em 0;
  font-size: 0.9em; color: var(--pst-color-text-base, #222); }
.el-explorer .el-controls { display: flex; flex-wrap: wrap; gap: 0.4em 1.2em; align-items: center; margin-bottom: 0.6em; }
.el-explorer .el-controls label { display: inline-flex; align-items: center; gap: 0.4em; }
.el-explorer .el-controls output { font-variant-numeric: tabular-nums; min-width: 3.5em; }
.el-explorer input[type=range] { width: 10em; accent-color: var(--pst-color-primary, #1f77b4); }
.el-explorer input[type=text] { width: 22em; max-width: 100%; font: inherit; }
.el-explorer button { font: inherit; padding: 0.1em 0.8em; border-radius: 4px; cursor: pointer;
  border: 1px solid var(--pst-color-border, #ccc); background: var(--pst-color-surface, #f5f5f5);
  color: var(--pst-color-text-base, #222); }
.el-explorer button:hover { border-color: var(--pst-color-primary, #1f77b4); }
.el-explorer .el-row { display: flex; flex-wrap: wrap; gap: 0.6em 1.2em; align-items: flex-start; }
.el-explorer .el-row > * { flex: 1 1 20em; min-width: 0; }
.el-explorer svg.el-plot { display: block; width: 100%; max-width: 34em; height: auto; overflow: visible; }
.el-explorer svg text { fill: currentColor; font-family: inherit; }
.el-explorer .el-grid { stroke: currentColor; stroke-opacity: 0.12; }
.el-explorer .el-axis { stroke: currentColor; stroke-opacity: 0.55; fill: none; }
.el-explorer .el-readout { font-variant-numeric: tabular-nums; margin-top: 0.4em; line-height: 1.5; }
.el-explorer .el-legend { font-size: 0.85em; margin-top: 0.2em; }
.el-explorer .el-swatch { display: inline-block; width: 1.6em; height: 0; border-top: 3px solid; vertical-align: middle;
  margin: 0 0.3em 0 0.9em; }
.el-explorer .el-picked { outline: 2px solid var(--pst-color-primary, #1f77b4); outline-offset: 2px; }
@media print { .el-explorer { break-inside: avoid; } .el-explorer .el-controls { display: none; } }`;

  /* Mark div as a live figure (the shared style, injected once) and empty it. */
  function frame(div) {
    if (!document.getElementById("el-explorer-style")) {
      html("style", { id: "el-explorer-style", textContent: STYLE }, document.head);
    }
    div.classList.add("el-explorer");
    div.replaceChildren();
  }

  /* A labelled range slider; value() reads it (through `from` when the slider runs on another scale, e.g. log T),
   * and onChange(f) calls f while it is dragged. */
  function slider(parent, label, { min, max, step, value, from = (v) => v, to = (v) => v, format = String }) {
    const wrap = html("label", {}, parent), out = html("output");
    const input = html("input", { type: "range", min, max, step, value: to(value) });
    input.setAttribute("aria-label", label);
    wrap.append(label, input, out);
    const read = () => from(+input.value);
    const show = () => { out.value = format(read()); };
    show();
    return {
      input, value: read,
      set(v) { input.value = to(v); show(); },
      onChange(f) { input.addEventListener("input", () => { show(); f(); }); },
    };
  }

  function button(parent, text, onClick) {
    const b = html("button", { type: "button", textContent: text }, parent);
    b.addEventListener("click", onClick);
    return b;
  }

  /* The buttons of a figure that iterates: "one step" calls advance(), "run" repeats it every `interval` ms until it
   * returns false (nothing moved) or is pressed again, "reset" stops and calls reset(). Returns {stop}. */
  function stepper(parent, advance, reset, interval = 220) {
    const div = html("div", { className: "el-controls" }, parent);
    let timer = null;
    const stop = () => {
      if (timer) clearInterval(timer);
      timer = null;
      runButton.textContent = "run";
    };
    button(div, "one step", () => { stop(); advance(); });
    const runButton = button(div, "run", () => {
      if (timer) return stop();
      runButton.textContent = "stop";
      timer = setInterval(() => { if (!advance()) stop(); }, interval);
    });
    button(div, "reset", () => { stop(); reset(); });
    return { stop };
  }

  /* A legend line: [[text, colour, dashed], ...]. */
  function legend(parent, items) {
    const div = html("div", { className: "el-legend" }, parent);
    for (const [text, color, dashed] of items) {
      const sw = html("span", { className: "el-swatch" }, div);
      sw.style.borderTopColor = color;
      if (dashed) sw.style.borderTopStyle = "dashed";
      div.append(text);
    }
    return div;
  }

  // ------------------------------------------------------------------ plots
  /* About n round ticks between lo and hi, labelled with the decimals their spacing needs. */
  function niceTicks(lo, hi, n = 5) {
    const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / mag;
    const step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag, out = [];
    const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
    for (let k = Math.ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k++) {
      const v = k * step;
      out.push([v, Math.abs(v) >= 1e5 ? v.toExponential(0) : v.toFixed(decimals)]);
    }
    return out;
  }

  /* Ticks of a log axis: 1 and 3 times the powers of ten (only the powers when the range spans many). */
  function logTicks(lo, hi) {
    const out = [], e0 = Math.floor(Math.log10(lo)), e1 = Math.ceil(Math.log10(hi));
    const every = Math.max(1, Math.ceil((e1 - e0) / 6));
    for (let e = e0; e <= e1; e += e1 - e0 > 4 ? every : 1) {
      for (const m of e1 - e0 > 4 ? [1] : [1, 3]) {
        const v = m * Math.pow(10, e);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push([v, e >= -3 && e <= 4 ? String(+v.toPrecision(1)) : `1e${e}`]);
      }
    }
    return out;
  }

  /* Axes in an SVG of viewBox width × height: x and y = {min, max, log, label, ticks ([[value, label], ...])}.
   * Returns {svg, sx, sy, layer, box} with sx/sy mapping data to the viewBox; `layer` is a group clipped to the box. */
  function axes(parent, { width = 420, height = 260, x, y, title, margin = {} }) {
    const m = { l: 48, r: 12, t: title ? 24 : 10, b: x.label ? 40 : 24, ...margin };
    const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "el-plot", role: "img" }, parent);
    if (title) root.setAttribute("aria-label", title);
    const X0 = m.l, X1 = width - m.r, Y0 = height - m.b, Y1 = m.t;
    const scale = (a, v) => (a.log ? (Math.log10(v) - Math.log10(a.min)) / (Math.log10(a.max) - Math.log10(a.min))
                                   : (v - a.min) / (a.max - a.min));
    const sx = (v) => X0 + scale(x, v) * (X1 - X0), sy = (v) => Y0 - scale(y, v) * (Y0 - Y1);
    const ticks = (a) => a.ticks || (a.log ? logTicks(a.min, a.max) : niceTicks(a.min, a.max));
    const id = "el-clip-" + Math.random().toString(36).slice(2);
    const cp = svg("clipPath", { id }, svg("defs", {}, root));
    svg("rect", { x: X0, y: Y1, width: X1 - X0, height: Y0 - Y1 }, cp);
    for (const [v, label] of ticks(x)) {
      svg("line", { x1: sx(v), x2: sx(v), y1: Y1, y2: Y0, class: "el-grid" }, root);
      svg("text", { x: sx(v), y: Y0 + 14, "text-anchor": "middle", "font-size": 11 }, root).textContent = label;
    }
    for (const [v, label] of ticks(y)) {
      svg("line", { x1: X0, x2: X1, y1: sy(v), y2: sy(v), class: "el-grid" }, root);
      svg("text", { x: X0 - 5, y: sy(v) + 4, "text-anchor": "end", "font-size": 11 }, root).textContent = label;
    }
    svg("rect", { x: X0, y: Y1, width: X1 - X0, height: Y0 - Y1, class: "el-axis" }, root);
    if (x.label) svg("text", { x: (X0 + X1) / 2, y: height - 6, "text-anchor": "middle", "font-size": 12 }, root)
      .textContent = x.label;
    if (y.label) svg("text", { x: 12, y: (Y0 + Y1) / 2, "text-anchor": "middle", "font-size": 12,
                               transform: `rotate(-90 12 ${(Y0 + Y1) / 2})` }, root).textContent = y.label;
    if (title) svg("text", { x: (X0 + X1) / 2, y: 15, "text-anchor": "middle", "font-size": 13 }, root)
      .textContent = title;
    const layer = svg("g", { "clip-path": `url(#${id})` }, root);
    return { svg: root, sx, sy, layer, box: { X0, X1, Y0, Y1 } };
  }

  /* A polyline through points [[x, y], ...] (non-finite points skipped) and, with r, a dot at each. */
  function curve(ax, points, { color = PALETTE[0], width = 2, dash = "", r = 0, opacity = 1 } = {}) {
    const ok = points.filter(([a, b]) => Number.isFinite(a) && Number.isFinite(b));
    const g = svg("g", { opacity }, ax.layer);
    svg("polyline", { points: ok.map(([a, b]) => `${ax.sx(a).toFixed(2)},${ax.sy(b).toFixed(2)}`).join(" "),
                      fill: "none", stroke: color, "stroke-width": width, "stroke-dasharray": dash,
                      "stroke-linejoin": "round" }, g);
    if (r) for (const [a, b] of ok) svg("circle", { cx: ax.sx(a), cy: ax.sy(b), r, fill: color }, g);
    return g;
  }

  /* Bars of heights ys at x = 0..n-1 (the x axis from -0.5 to n - 0.5), labelled below by labels. */
  function bars(ax, ys, { color = PALETTE[0], labels = [] } = {}) {
    const w = (ax.sx(1) - ax.sx(0)) * 0.7;
    ys.forEach((v, i) => {
      svg("rect", { x: ax.sx(i) - w / 2, y: ax.sy(Math.max(v, 0)), width: w,
                    height: Math.abs(ax.sy(0) - ax.sy(v)), fill: color }, ax.layer);
      if (labels[i] !== undefined) svg("text", { x: ax.sx(i), y: ax.box.Y0 + 14, "text-anchor": "middle",
                                                 "font-size": 11 }, ax.svg).textContent = labels[i];
    });
  }

  /* A rows × cols image of values in [0, 1] as squares of `cell` px: ink (currentColor) with that opacity. */
  function image(parent, values, rows, cols, { cell = 12, title = "" } = {}) {
    const root = svg("svg", { viewBox: `0 0 ${cols * cell} ${rows * cell}`, width: cols * cell, height: rows * cell,
                              role: "img", "aria-label": title }, parent);
    svg("rect", { width: cols * cell, height: rows * cell, fill: "none", class: "el-axis" }, root);
    values.forEach((v, k) => {
      if (v > 0.004) svg("rect", { x: (k % cols) * cell, y: Math.floor(k / cols) * cell, width: cell, height: cell,
                                  fill: "currentColor", "fill-opacity": Math.min(1, v).toFixed(3) }, root);
    });
    return root;
  }

  /* Start f(div) on every div matching selector once the page is parsed. */
  function onReady(selector, f) {
    const start = () => document.querySelectorAll(selector).forEach(f);
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
    else start();
  }

  window.ExplorerKit = { dot, matvec, sum, logsumexp, softmax, solve, rng, PALETTE, svg, html, frame, slider, button,
                         stepper, legend, axes, curve, bars, image, onReady };
})();
