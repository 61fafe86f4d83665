/* Chapter 3's Hopfield retrieval, run in the page: energylab.forms.hopfield in JavaScript.
 *
 *   E(ξ)  = -β⁻¹ log Σ_i exp(β x_iᵀξ) + ½ ξᵀξ       energy(xi, X, beta)   = hopfield_energy
 *   ξ_new = ξ + (X softmax(β Xᵀξ) - ξ)               step(xi, X, beta)     = xi + hopfield_update
 *   retrieve(xi, X, beta, steps) -> {states, energies}, as energylab.experiments.hopfield.retrieve
 *
 * with the patterns x_i the rows of X, in float64. The stored patterns are the digits 0-9 of a 5 x 7 pixel font,
 * prepared as the chapter prepares its MNIST digits: pixels ±1, minus their mean, scaled to unit norm (so M = 1 and β
 * acts on cosines). A query is a stored digit with a fraction of its pixels flipped, chosen by a seeded generator
 * (reproducible), then prepared the same way. The site's smoke test (scripts/smoke_site.py) checks energy, step and
 * retrieve against the library, on fixed patterns and on the page's own digits and corrupted queries.
 *
 * HopfieldExplorer.mount(div) draws the explorer into every <div class="hopfield-explorer">: pick a digit, set the
 * flipped fraction, the seed and β, then step the update once or run it, and watch the state, the softmax weights
 * over the stored digits and the energy trace. It needs explorer_kit.js and no kernel.
 */
(function () {
  "use strict";
  const K = window.ExplorerKit;

  const energy = (xi, X, beta) => -K.logsumexp(X.map((x) => beta * K.dot(x, xi))) / beta + 0.5 * K.dot(xi, xi);
  const weights = (xi, X, beta) => K.softmax(X.map((x) => beta * K.dot(x, xi)));

  function step(xi, X, beta) {  // ξ + update, update = X softmax(β Xᵀξ) - ξ
    const p = weights(xi, X, beta);
    return xi.map((v, a) => v + (K.sum(p.map((pi, i) => pi * X[i][a])) - v));
  }

  function retrieve(xi, X, beta, steps) {
    const states = [xi], energies = [energy(xi, X, beta)];
    for (let k = 0; k < steps; k++) { xi = step(xi, X, beta); states.push(xi); energies.push(energy(xi, X, beta)); }
    return { states, energies };
  }

  // the digits 0-9, 5 x 7 pixels ('#' ink)
  const FONT = [
    ".###.#...##..###.#.###..##...#.###.", "..#...##....#....#....#....#...###.", ".###.#...#....#...#...#...#...#####",
    "#####...#...#.....#.....##...#.###.", "...#...##..#.#.#..#.#####...#....#.", "######....####.....#....##...#.###.",
    "..##..#...#....####.#...##...#.###.", "#####....#...#...#...#....#....#...", ".###.#...##...#.###.#...##...#.###.",
    ".###.#...##...#.####....#...#..##..",
  ];
  const ROWS = 7, COLS = 5;

  function prepare(raw) {  // minus the mean pixel, then unit norm
    const m = K.sum(raw) / raw.length, c = raw.map((v) => v - m), r = Math.sqrt(K.dot(c, c));
    return c.map((v) => v / r);
  }

  const rawDigit = (k) => [...FONT[k]].map((ch) => (ch === "#" ? 1 : -1));
  const patterns = () => FONT.map((_, k) => prepare(rawDigit(k)));

  /* Digit k with round(fraction · 35) of its pixels flipped, the pixels drawn by ExplorerKit.rng(seed). */
  function corrupt(k, fraction, seed) {
    const raw = rawDigit(k), g = K.rng(seed), idx = raw.map((_, i) => i), n = Math.round(fraction * raw.length);
    for (let j = 0; j < n; j++) {  // a partial Fisher-Yates shuffle: the first n entries are the flipped pixels
      const r = j + Math.floor(g.uniform() * (idx.length - j));
      [idx[j], idx[r]] = [idx[r], idx[j]];
      raw[idx[j]] = -raw[idx[j]];
    }
    return prepare(raw);
  }

  const MAX_STEPS = 40, TOL = 1e-10;
  const deltaE = (d, e) => (Math.abs(d) < 1e-12 * Math.max(1, Math.abs(e)) ? "0 to rounding" : d.toExponential(2));
  const shade = (xi) => {  // each image on its own scale: lowest pixel blank, highest full ink
    const lo = Math.min(...xi), hi = Math.max(...xi);
    return xi.map((v) => (v - lo) / (hi - lo || 1));
  };

  /* The query's controls, shared with chapter 12's explorer: the stored digits X to click, the flipped fraction,
   * the seed and β (a log slider over [10^betaMin, 10^betaMax]); onChange() after any change. Returns the sliders,
   * digit() (the one clicked), mark() (outline it) and the controls' row (for more controls). */
  function queryControls(div, X, { digit, flip, seed, beta, betaMin, betaMax }, onChange) {
    const picker = K.html("div", { className: "el-controls" }, div);
    picker.append("stored digits (click one):");
    let picked = digit;
    const thumbs = X.map((x, k) => {
      const t = K.image(picker, shade(x), ROWS, COLS, { cell: 5, title: `stored digit ${k}` });
      t.style.cursor = "pointer";
      t.addEventListener("click", () => { picked = k; onChange(); });
      return t;
    });
    const row = K.html("div", { className: "el-controls" }, div);
    const sliders = {
      flip: K.slider(row, "flipped pixels", { min: 0, max: 0.5, step: 0.01, value: flip,
                                              format: (v) => `${Math.round(v * 100)}%` }),
      seed: K.slider(row, "seed", { min: 0, max: 20, step: 1, value: seed }),
      beta: K.slider(row, "β", { min: betaMin, max: betaMax, step: 0.001, value: beta, from: (v) => Math.pow(10, v),
                                 to: Math.log10, format: (v) => v.toPrecision(3) }),
    };
    for (const sl of Object.values(sliders)) sl.onChange(onChange);
    return { ...sliders, row, digit: () => picked,
             mark: () => thumbs.forEach((t, j) => t.classList.toggle("el-picked", j === picked)) };
  }

  function mount(div) {
    const X = patterns();
    K.frame(div);
    const q = queryControls(div, X, { digit: 3, flip: 0.2, seed: 0, beta: 16, betaMin: 0, betaMax: 2 }, () => reset());
    const steps = K.stepper(div, advance, () => reset());
    const row = K.html("div", { className: "el-row" }, div);
    const images = K.html("div", {}, row), bars = K.html("div", {}, row), trace = K.html("div", {}, row);
    images.style.flex = "0 0 auto";
    bars.style.flex = trace.style.flex = "1 1 14em";
    const readout = K.html("div", { className: "el-readout" }, div);
    const state = { states: [], energies: [] };

    function reset() {
      steps.stop();
      const xi = corrupt(q.digit(), q.flip.value(), q.seed.value());
      state.states = [xi];
      state.energies = [energy(xi, X, q.beta.value())];
      draw();
    }

    function advance() {  // one update; false once the state has stopped moving (or MAX_STEPS)
      const b = q.beta.value(), xi = state.states.at(-1), next = step(xi, X, b);
      const moved = Math.sqrt(K.sum(next.map((v, a) => (v - xi[a]) ** 2)));
      if (state.states.length > MAX_STEPS || moved < TOL) return false;
      state.states.push(next);
      state.energies.push(energy(next, X, b));
      draw();
      return true;
    }

    function draw() {
      const b = q.beta.value(), xi = state.states.at(-1), k = state.states.length - 1, digit = q.digit();
      const target = X[digit];
      q.mark();
      images.replaceChildren();
      for (const [title, v] of [["query ξ₀", state.states[0]], [`state ξ after ${k} step${k === 1 ? "" : "s"}`, xi]]) {
        const box = K.html("div", {}, images);
        box.style.cssText = "margin:0 0 0.6em 0;text-align:center";
        K.image(box, shade(v), ROWS, COLS, { cell: 12, title });
        K.html("div", { textContent: title }, box).style.fontSize = "0.85em";
      }
      bars.replaceChildren();
      trace.replaceChildren();
      const p = weights(xi, X, b);
      const wx = K.axes(bars, { width: 300, height: 230, x: { min: -0.5, max: 9.5, ticks: [], label: "stored digit" },
                                y: { min: 0, max: 1 }, title: "weights softmax(β Xᵀξ)" });
      K.bars(wx, p, { labels: X.map((_, j) => String(j)) });
      const n = state.energies.length, e = state.energies, elo = Math.min(...e), ehi = Math.max(...e);
      const pad = Math.max((ehi - elo) * 0.1, Math.abs(ehi) * 0.02, 1e-3);
      const ex = K.axes(trace, { width: 300, height: 230, x: { min: 0, max: Math.max(5, n - 1), label: "step k" },
                                 y: { min: elo - pad, max: ehi + pad }, title: "energy E(ξ_k)", margin: { l: 56 } });
      K.curve(ex, e.map((v, j) => [j, v]), { color: K.PALETTE[1], r: 3 });
      const dist = Math.sqrt(K.sum(xi.map((v, a) => (v - target[a]) ** 2)));
      readout.textContent = `digit ${digit}, β = ${b.toPrecision(3)}, step ${k}: E = ${e.at(-1).toFixed(6)}` +
        (k ? ` (ΔE = ${deltaE(e.at(-1) - e.at(-2), e.at(-1))})` : "") +
        `;  ‖ξ − x_${digit}‖ = ${dist.toFixed(4)}` + (dist <= 0.1 ? " (retrieved)" : "") +
        `;  participation 1/Σp² = ${(1 / K.dot(p, p)).toFixed(2)}`;
      div.dataset.drawn = "1";
    }

    reset();
  }

  window.HopfieldExplorer = { energy, weights, step, retrieve, patterns, corrupt, shade, queryControls, ROWS, COLS,
                              mount };
  K.onReady("div.hopfield-explorer", mount);
})();
