/* Chapter 12's sparse retrieval, run in the page: energylab.forms.sparse_hopfield in JavaScript.
 *
 *   map(θ, kind, α)        ŷ_Ω(θ): softmax, sparsemax, 1.5-entmax (exact, by sorting), α-normmax (bisection)
 *   energy(ξ, X, β, kind)  E(ξ) = -β⁻¹ Ω*(β Xξ) + ½ ξᵀξ, Ω*(θ) = ⟨ŷ, θ⟩ - Ω(ŷ)   = fy_hopfield_energy
 *   step(ξ, X, β, kind)    Xᵀ ŷ_Ω(β Xξ)                                        = ξ + fy_hopfield_update
 *   retrieve(ξ, X, β, kind, steps) -> {states, energies}
 *
 * in float64, written as the library writes them (the same sorts, thresholds and number of bisection halvings), so
 * that the site's smoke test (scripts/smoke_site.py) can require agreement to 1e-9 on random scores and patterns and
 * on the page's own digits. The patterns and the corrupted queries are chapter 3's explorer's (HopfieldExplorer:
 * the ten digits of a 5 x 7 pixel font at unit norm, a seeded fraction of one digit's pixels flipped).
 *
 * SparseHopfieldExplorer.mount(div) draws the explorer into every <div class="sparse-hopfield-explorer">: softmax and
 * a sparse map side by side on the same query, stepped together. It needs explorer_kit.js and hopfield_explorer.js
 * and no kernel.
 */
(function () {
  "use strict";
  const K = window.ExplorerKit;
  const EPS = 2 ** -52;  // float64's machine epsilon (torch.finfo(torch.float64).eps)
  const TINY = 2 ** -1022;  // the smallest normal float64 (torch.finfo(torch.float64).tiny)

  const posPow = (x, e) => (x > 0 ? x ** e : 0);  // [x]_+^e
  const cumsum = (a) => { let s = 0; return a.map((v) => (s += v)); };
  const normalise = (p) => { const z = K.sum(p); return p.map((v) => v / z); };
  const shifted = (theta) => { const m = Math.max(...theta); return theta.map((v) => v - m); };

  /* sparsemax: [θ - τ]_+ with τ from the sorted scores (the support: every k with 1 + kθ_(k) > Σ_{j≤k} θ_(j)). */
  function sparsemax(theta) {
    const z = shifted(theta), srt = [...z].sort((a, b) => b - a), cum = cumsum(srt);
    const k = srt.filter((v, j) => 1 + (j + 1) * v > cum[j]).length;
    const tau = (cum[k - 1] - 1) / k;
    return normalise(z.map((v) => Math.max(v - tau, 0)));
  }

  /* 1.5-entmax: [θ/2 - τ]_+², τ exact by sorting (the largest k with τ_k ≤ z_(k)). */
  function entmax15(theta) {
    const z = shifted(theta).map((v) => v / 2), srt = [...z].sort((a, b) => b - a);
    const sum = cumsum(srt), sq = cumsum(srt.map((v) => v * v));
    const mean = sum.map((s, j) => s / (j + 1)), spread = sq.map((s, j) => s - (j + 1) * mean[j] ** 2);
    const tauAll = mean.map((m, j) => m - Math.sqrt(Math.max((1 - spread[j]) / (j + 1), 0)));
    const k = srt.filter((v, j) => tauAll[j] <= v).length;
    const tau = mean[k - 1] - Math.sqrt(Math.max((1 - spread[k - 1]) / k, TINY));
    return normalise(z.map((v) => Math.max(v - tau, 0) ** 2));
  }

  /* The root of a decreasing f on [lo, hi], halved as often as the library does (52 + 3 times in float64). */
  function bisect(f, lo, hi) {
    for (let i = 0; i < Math.round(-Math.log2(EPS)) + 3; i++) {
      const mid = (lo + hi) / 2;
      if (f(mid) >= 0) lo = mid; else hi = mid;
    }
    return (lo + hi) / 2;
  }

  /* α-normmax: u/Σu, u_j = [θ_j - τ]_+^{1/(α-1)}, Σ_j [θ_j - τ]_+^{α/(α-1)} = 1, τ in [max θ - 1, max θ]. */
  function normmax(theta, alpha) {
    const e = 1 / (alpha - 1), z = shifted(theta);
    const tau = bisect((t) => K.sum(z.map((v) => posPow(v - t, alpha * e))) - 1, -1, 0);
    return normalise(z.map((v) => posPow(v - tau, e)));
  }

  /* Ω on the simplex, 0 at the vertices: Shannon (softmax), Tsallis α = 2 and 1.5, ‖p‖_α - 1 (normmax). */
  const tsallis = (p, a) => (K.sum(p.map((v) => posPow(v, a))) - 1) / (a * (a - 1));
  const KINDS = {
    softmax: { label: "softmax", map: K.softmax, omega: (p) => K.sum(p.map((v) => (v > 0 ? v * Math.log(v) : 0))),
               margin: Infinity },
    sparsemax: { label: "sparsemax", map: sparsemax, omega: (p) => tsallis(p, 2), margin: 1 },
    entmax15: { label: "1.5-entmax", map: entmax15, omega: (p) => tsallis(p, 1.5), margin: 2 },
    normmax: { label: "2-normmax", map: (t) => normmax(t, 2),
               omega: (p) => Math.sqrt(K.sum(p.map((v) => v * v))) - 1, margin: 1 },
  };

  function kindOf(kind) {
    if (!(kind in KINDS)) throw new Error(`kind must be one of ${Object.keys(KINDS).join(", ")}, got ${kind}`);
    return KINDS[kind];
  }

  const map = (theta, kind) => kindOf(kind).map(theta);
  const scores = (xi, X, beta) => X.map((x) => beta * K.dot(x, xi));
  const weights = (xi, X, beta, kind) => map(scores(xi, X, beta), kind);

  function conjugate(theta, kind) {  // Ω*(θ) = ⟨ŷ, θ⟩ - Ω(ŷ)
    const k = kindOf(kind), p = k.map(theta);
    return K.dot(p, theta) - k.omega(p);
  }

  const energy = (xi, X, beta, kind) => -conjugate(scores(xi, X, beta), kind) / beta + 0.5 * K.dot(xi, xi);

  /* The rate-one step ξ_new = Xᵀŷ_Ω(βXξ) (= ξ + fy_hopfield_update), computed without the round trip through ξ, so
   * that one-hot weights give the pattern bit for bit, as chapter 12's retrieval grid counts it. */
  function step(xi, X, beta, kind) {
    const p = weights(xi, X, beta, kind);
    return xi.map((_, a) => K.sum(p.map((pi, i) => pi * X[i][a])));
  }

  function retrieve(xi, X, beta, kind, steps) {
    const states = [xi], energies = [energy(xi, X, beta, kind)];
    for (let k = 0; k < steps; k++) {
      xi = step(xi, X, beta, kind);
      states.push(xi);
      energies.push(energy(xi, X, beta, kind));
    }
    return { states, energies };
  }

  /* x_tᵀξ - max_{j≠t} x_jᵀξ (sparse_hopfield.query_margin): one step is exact iff β times it is ≥ the margin m. */
  function queryMargin(xi, X, t) {
    const s = X.map((x) => K.dot(x, xi));
    return s[t] - Math.max(...s.filter((_, j) => j !== t));
  }

  const MAX_STEPS = 40, TOL = 1e-12;
  // where the figure starts: sparsemax exact in one step, 1.5-entmax not (chapter 12's text says so, the smoke test
  // checks it on the page's digits)
  const DEFAULTS = { digit: 3, flip: 0.2, seed: 0, beta: 4 };

  function mount(div) {
    const H = window.HopfieldExplorer, X = H.patterns();
    K.frame(div);
    const q = H.queryControls(div, X, { ...DEFAULTS, betaMin: -1, betaMax: 2 }, () => reset());
    const pick = K.html("label", {}, q.row);
    pick.append("sparse map");
    const select = K.html("select", {}, pick);
    for (const kind of ["sparsemax", "entmax15", "normmax"]) {
      K.html("option", { value: kind, textContent: KINDS[kind].label }, select);
    }
    const steps = K.stepper(div, advance, () => reset());
    const row = K.html("div", { className: "el-row" }, div);
    const panels = [0, 1].map(() => K.html("div", {}, row));
    const readout = K.html("div", { className: "el-readout" }, div);
    const state = { runs: [] };  // runs: [{kind, states, energies}] for softmax and the sparse map

    const kinds = () => ["softmax", select.value];

    function reset() {
      steps.stop();
      const xi = H.corrupt(q.digit(), q.flip.value(), q.seed.value()), b = q.beta.value();
      state.runs = kinds().map((kind) => ({ kind, states: [xi], energies: [energy(xi, X, b, kind)] }));
      draw();
    }

    function advance() {  // one update of both; false once neither state moves any more (or MAX_STEPS)
      const b = q.beta.value();
      let moved = 0;
      for (const r of state.runs) {
        const xi = r.states.at(-1), next = step(xi, X, b, r.kind);
        moved = Math.max(moved, Math.sqrt(K.sum(next.map((v, a) => (v - xi[a]) ** 2))));
        r.states.push(next);
        r.energies.push(energy(next, X, b, r.kind));
      }
      if (state.runs[0].states.length > MAX_STEPS + 1 || moved < TOL) {
        for (const r of state.runs) { r.states.pop(); r.energies.pop(); }
        return false;
      }
      draw();
      return true;
    }

    function draw() {
      const b = q.beta.value(), t = q.digit(), target = X[t], k = state.runs[0].states.length - 1;
      q.mark();
      state.runs.forEach((r, c) => {
        const panel = panels[c], xi = r.states.at(-1), p = weights(xi, X, b, r.kind), label = KINDS[r.kind].label;
        panel.replaceChildren();
        const top = K.html("div", {}, panel);
        top.style.cssText = "display:flex;gap:0.8em;align-items:center";
        K.image(top, H.shade(xi), H.ROWS, H.COLS, { cell: 10, title: `${label}: state after ${k} steps` });
        const dist = Math.sqrt(K.sum(xi.map((v, a) => (v - target[a]) ** 2)));
        const support = p.filter((v) => v > 0).length;
        K.html("div", { innerHTML: `<b>${label}</b>, after ${k} step${k === 1 ? "" : "s"}<br>` +
          `support: ${support} of ${X.length} digits<br>` +
          `‖ξ − x<sub>${t}</sub>‖ = ${dist === 0 ? "0 exactly" : dist.toExponential(2)}<br>` +
          `E = ${r.energies.at(-1).toFixed(6)}` }, top);
        const ax = K.axes(panel, { width: 300, height: 200, x: { min: -0.5, max: 9.5, ticks: [], label: "stored digit" },
                                   y: { min: 0, max: 1 }, title: `weights ${label}(β Xξ)` });
        K.bars(ax, p, { labels: X.map((_, j) => String(j)), color: K.PALETTE[c] });
      });
      const gap = queryMargin(state.runs[0].states[0], X, t), m = KINDS[select.value].margin;
      readout.textContent = `digit ${t}, β = ${b.toPrecision(3)}: the query's margin β(x_${t}ᵀξ₀ − max_j≠${t} x_jᵀξ₀) = ` +
        `${(b * gap).toFixed(3)} against ${KINDS[select.value].label}'s margin m = ${m}: ` +
        (b * gap >= m ? "≥ m, so one step lands exactly on the digit (softmax never does)." :
          (gap > 0 ? `below m: one step mixes digits; β ≥ ${(m / gap).toPrecision(3)} would make it exact.` :
            "not positive: another digit scores at least as high, and no β retrieves this one in one step."));
      div.dataset.drawn = "1";
    }

    select.addEventListener("change", () => reset());
    reset();
  }

  window.SparseHopfieldExplorer = { sparsemax, entmax15, normmax, map, weights, conjugate, energy, step, retrieve,
                                    queryMargin, DEFAULTS, mount };
  K.onReady("div.sparse-hopfield-explorer", mount);
})();
