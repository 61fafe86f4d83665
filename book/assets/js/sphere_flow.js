/* Tokens as particles on the sphere, integrated in the page: the SA/USA flows of energylab.flows, in JavaScript.
 *
 *   SA:   dx_i/dt = P_{x_i}( sum_h sum_j softmax_j(beta <Q_h x_i, K_h x_j>) V_h x_j )
 *   USA:  dx_i/dt = P_{x_i}( sum_h (1/n) sum_j exp(beta <Q_h x_i, K_h x_j>) V_h x_j ),   P_x y = y - <x, y> x
 *
 * Euler (x <- N(x + h v)) or RK4 on the ambient ODE followed by the same normalisation N, exactly as
 * energylab.flows._flow_step, in float64 (JavaScript numbers). Shapes follow book/notation.md: tokens (N, d),
 * Q and K (H, d_h, d), V (H, d, d), as nested arrays. The site's smoke test (scripts/smoke_site.py) checks a
 * trajectory against the Python integrator to 1e-6.
 *
 * SphereFlow.mount(div) draws the explorer into every <div class="sphere-explorer">: n, beta, the weight preset,
 * heads, step, seed and SA/USA, redrawn live with the plotly.js the site ships; no kernel is needed. Random starts
 * and random presets use a seeded generator of their own (the same distributions as energylab.sphere.random_tokens
 * and energylab.flows.preset_weights, not the same draws as torch's generator). It needs explorer_kit.js.
 */
(function () {
  "use strict";
  const { dot, matvec, rng } = window.ExplorerKit;  // explorer_kit.js: the live figures' shared numerics

  const normalize = (x) => { const r = Math.sqrt(dot(x, x)); return x.map((v) => v / r); };

  function velocity(X, W, beta, normalized) {
    const n = X.length, d = X[0].length, H = W.Q.length;
    const out = X.map(() => new Array(d).fill(0));
    for (let h = 0; h < H; h++) {
      const q = X.map((x) => matvec(W.Q[h], x)), k = X.map((x) => matvec(W.K[h], x));
      const v = X.map((x) => matvec(W.V[h], x));
      for (let i = 0; i < n; i++) {
        const s = k.map((kj) => beta * dot(q[i], kj));
        let a;
        if (normalized) {  // softmax, shifted by the max so that it is finite for any beta
          const m = Math.max(...s), e = s.map((sj) => Math.exp(sj - m)), z = e.reduce((p, c) => p + c, 0);
          a = e.map((ej) => ej / z);
        } else {
          a = s.map((sj) => Math.exp(sj) / n);
        }
        for (let j = 0; j < n; j++) for (let c = 0; c < d; c++) out[i][c] += a[j] * v[j][c];
      }
    }
    return out.map((y, i) => { const p = dot(X[i], y); return y.map((yc, c) => yc - p * X[i][c]); });
  }

  const axpy = (X, h, V) => X.map((x, i) => x.map((xc, c) => xc + h * V[i][c]));

  function step(X, W, cfg) {
    const f = (Y) => velocity(Y, W, cfg.beta, cfg.normalized), h = cfg.step;
    if (cfg.method !== "rk4") return axpy(X, h, f(X)).map(normalize);
    const k1 = f(X), k2 = f(axpy(X, h / 2, k1)), k3 = f(axpy(X, h / 2, k2)), k4 = f(axpy(X, h, k3));
    return X.map((x, i) => normalize(x.map((xc, c) =>
      xc + h / 6 * (k1[i][c] + 2 * k2[i][c] + 2 * k3[i][c] + k4[i][c]))));
  }

  /* Every state from x0 to step cfg.steps: cfg = {beta, normalized, step, steps, method}. */
  function simulate(x0, W, cfg) {
    const states = [x0];
    let X = x0;
    for (let s = 0; s < cfg.steps; s++) { X = step(X, W, cfg); states.push(X); }
    return states;
  }

  const randn = (g, r, c) => Array.from({ length: r }, () => Array.from({ length: c }, g.normal));
  const eye = (d) => Array.from({ length: d }, (_, i) => Array.from({ length: d }, (_, j) => +(i === j)));
  const matmul = (A, B) => A.map((row) => B[0].map((_, j) => row.reduce((s, a, k) => s + a * B[k][j], 0)));
  const transpose = (A) => A[0].map((_, j) => A.map((row) => row[j]));
  const randomTokens = (n, d, g) => randn(g, n, d).map(normalize);

  /* The presets of energylab.flows.preset_weights: identity, symmetric, random, antisymmetric. */
  function presetWeights(name, d, heads, g) {
    const dh = d / heads, I = eye(d), Q = [], K = [], V = [];
    for (let h = 0; h < heads; h++) {
      const P = I.slice(h * dh, (h + 1) * dh), block = matmul(transpose(P), P);
      if (name === "random") {
        const sc = (M) => M.map((r) => r.map((v) => v / Math.sqrt(d)));
        Q.push(sc(randn(g, dh, d))); K.push(sc(randn(g, dh, d))); V.push(sc(randn(g, d, d)));
      } else if (name === "symmetric") {
        const G = randn(g, d, d), S = G.map((r, i) => r.map((v, j) => v + G[j][i]));
        const BSB = matmul(matmul(block, S), block);
        const A = I.map((r, i) => r.map((v, j) => v + BSB[i][j] / (2 * Math.sqrt(dh))));
        Q.push(P); K.push(matmul(P, A)); V.push(matmul(block, A));
      } else if (name === "antisymmetric") {
        const G = randn(g, d, d), Om = G.map((r, i) => r.map((v, j) => v - G[j][i]));
        const norm = spectralNorm(Om);
        Q.push(P); K.push(P); V.push(matmul(block, I.map((r, i) => r.map((v, j) => v + 3 * Om[i][j] / norm))));
      } else {
        Q.push(P); K.push(P); V.push(block);
      }
    }
    return { Q, K, V };
  }

  function spectralNorm(A) {  // power iteration on A^T A
    let x = normalize(A.map((_, i) => 1 + i * 1e-3));  // deterministic start
    const AtA = matmul(transpose(A), A);
    for (let i = 0; i < 200; i++) x = normalize(matvec(AtA, x));
    return Math.sqrt(dot(x, matvec(AtA, x)));
  }

  const CONTROLS = [  // name, label, [min, max, step] or options, default
    ["n", "tokens n", [8, 256, 8], 48], ["beta", "β", [0, 9, 0.5], 1], ["step", "step h", [0.02, 0.5, 0.02], 0.1],
    ["steps", "steps", [20, 400, 20], 150], ["seed", "seed", [0, 20, 1], 0],
    ["preset", "weights", ["identity", "symmetric", "random", "antisymmetric"], "identity"],
    ["heads", "heads", ["1", "3"], "1"], ["flow", "flow", ["SA", "USA"], "SA"]];

  function mount(div) {
    const state = {}, form = document.createElement("div"), plot = document.createElement("div");
    form.className = "sphere-explorer-controls";
    form.style.cssText = "display:flex;flex-wrap:wrap;gap:0.4em 1.2em;font-size:0.9em;margin-bottom:0.5em";
    for (const [name, label, range, value] of CONTROLS) {
      const wrap = document.createElement("label"), out = document.createElement("output");
      let input;
      if (typeof range[0] === "number") {
        input = document.createElement("input");
        Object.assign(input, { type: "range", min: range[0], max: range[1], step: range[2], value });
      } else {
        input = document.createElement("select");
        for (const opt of range) input.add(new Option(opt, opt, opt === value, opt === value));
      }
      input.name = name;
      const read = () => { state[name] = input.type === "range" ? +input.value : input.value; out.value = input.value; };
      read();
      input.addEventListener("change", () => { read(); draw(); });
      input.addEventListener("input", () => { out.value = input.value; });
      wrap.append(label + " ", input, " ", out);
      form.append(wrap);
    }
    div.append(form, plot);

    function draw() {
      const g = rng(1000 + state.seed), d = 3, heads = +state.heads;
      const x0 = randomTokens(state.n, d, g), W = presetWeights(state.preset, d, heads, g);
      const states = simulate(x0, W, { beta: state.beta, normalized: state.flow === "SA", step: state.step,
                                       steps: state.steps, method: "euler" });
      const every = Math.max(1, Math.round(states.length / 40));
      const kept = states.filter((_, s) => s % every === 0 || s === states.length - 1);
      const trace = (X) => ({ type: "scatter3d", mode: "markers", x: X.map((p) => p[0]), y: X.map((p) => p[1]),
                              z: X.map((p) => p[2]), marker: { size: 3, color: X.map((_, i) => i),
                              colorscale: "Viridis" } });
      const times = kept.map((_, f) => (Math.min(f * every, states.length - 1) * state.step).toFixed(2));
      const frames = kept.map((X, f) => ({ name: times[f], data: [trace(X)] }));
      const layout = {
        height: 520, margin: { l: 0, r: 0, t: 30, b: 0 }, title: { text: `${state.flow}, t = 0 … ${times.at(-1)}` },
        scene: { aspectmode: "cube", xaxis: { range: [-1.05, 1.05] }, yaxis: { range: [-1.05, 1.05] },
                 zaxis: { range: [-1.05, 1.05] } },
        sliders: [{ currentvalue: { prefix: "t = " }, steps: times.map((t) => ({ label: t, method: "animate",
                    args: [[t], { mode: "immediate", frame: { duration: 0, redraw: true } }] })) }],
        updatemenus: [{ type: "buttons", showactive: false, x: 0, y: 0, buttons: [{ label: "▶", method: "animate",
                        args: [null, { frame: { duration: 60, redraw: true }, fromcurrent: true }] }] }],
      };
      window.Plotly.react(plot, { data: [trace(kept[0])], layout, frames });
    }
    draw();
    div.sphereFlowState = state;
  }

  window.SphereFlow = { velocity, step, simulate, presetWeights, randomTokens, rng, mount };
  window.ExplorerKit.onReady("div.sphere-explorer", mount);
})();
