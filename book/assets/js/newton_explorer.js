/* Chapter 4's gradient step against the Newton step on the elastic free energy, run in the page: energylab's
 * forms in JavaScript, with the weights and F* of free_energy_explorer.js (as energylab.forms.newton imports them
 * from energylab.forms.free_energy).
 *
 *   F*(z) = -T log Σ_i exp(-½‖z - W h_i‖² / T)                  freeEnergy(z, H, W, T)        = softmax_free_energy
 *   gradient direction  -∇F* = h̄ - z,  h̄ = Σ_i p_i W h_i        gradientDirection(z, H, W, T) = softmax_free_energy_update
 *   Newton direction    -[I - (1/T) Σ_i p_i d_i d_iᵀ]⁻¹ (z - h̄)  newtonDirection(z, H, W, T)   = att2nd_update
 *   descend(z0, H, W, T, eta, steps, method) -> {states, energies}: z <- z + η · direction, as energylab.descent.descend
 *
 * with d_i = W h_i - h̄, tokens H (N, d) as rows and W (d, d), in float64 (any d; the figure uses d = 2). The site's
 * smoke test (scripts/smoke_site.py) checks these against the library on fixed inputs, the figure's instance included.
 *
 * NewtonExplorer.mount(div) draws the explorer into every <div class="newton-explorer">: the landscape F*(z) over the
 * plane with both trajectories from one start (click the landscape to move it), sliders for the step size η, the
 * temperature T and the number of steps, and F*(z_k) per step for both methods. It needs explorer_kit.js and
 * free_energy_explorer.js, and no kernel.
 */
(function () {
  "use strict";
  const K = window.ExplorerKit, FE = window.FreeEnergyExplorer;

  const mapped = (H, W) => H.map((h) => K.matvec(W, h));  // rows W h_i
  const potentials = (z, WH) => WH.map((w) => 0.5 * K.sum(z.map((za, a) => (za - w[a]) ** 2)));
  const freeEnergy = (z, H, W, T) => FE.helmholtz(potentials(z, mapped(H, W)), T);

  function statistics(z, H, W, T) {  // p, the mapped tokens and h̄
    const WH = mapped(H, W), p = FE.weights(potentials(z, WH), T);
    return { p, WH, hbar: z.map((_, a) => K.sum(p.map((pi, i) => pi * WH[i][a]))) };
  }

  function gradientDirection(z, H, W, T) {
    const { hbar } = statistics(z, H, W, T);
    return hbar.map((v, a) => v - z[a]);
  }

  function newtonDirection(z, H, W, T) {
    const { p, WH, hbar } = statistics(z, H, W, T), n = z.length;
    const dev = WH.map((w) => w.map((v, a) => v - hbar[a]));
    const hess = Array.from({ length: n }, (_, a) => Array.from({ length: n }, (_, b) =>
      (a === b ? 1 : 0) - K.sum(p.map((pi, i) => pi * dev[i][a] * dev[i][b])) / T));
    return K.solve(hess, z.map((v, a) => v - hbar[a])).map((v) => -v);
  }

  const DIRECTIONS = { gradient: gradientDirection, newton: newtonDirection };

  function descend(z0, H, W, T, eta, steps, method) {
    const dir = DIRECTIONS[method], states = [z0], energies = [freeEnergy(z0, H, W, T)];
    let z = z0;
    for (let k = 0; k < steps; k++) {
      const u = dir(z, H, W, T);
      z = z.map((v, a) => v + eta * u[a]);
      states.push(z);
      energies.push(freeEnergy(z, H, W, T));
    }
    return { states, energies };
  }

  // the figure's instance: five tokens in the plane, W = I (two groups and a loner, as in section 4.1)
  const INSTANCE = { H: [[-1.5, -0.3], [-1.1, 0.5], [1.3, 0.8], [1.7, -0.2], [0.2, -1.4]], W: [[1, 0], [0, 1]],
                     T: 0.5, z0: [2.4, 1.9] };
  const VIEW = { x: [-3, 3], y: [-2.2, 2.6] }, GRID = [90, 72], FLOOR = 1e-16;  // ‖∇F*‖ drawn from 1e-16 up
  const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  const METHODS = [["gradient", "gradient step  z + η(h̄ − z)", K.PALETTE[0]],
                   ["newton", "Newton step (Att2nd)", K.PALETTE[1]]];

  function colour(t) {  // viridis, t in [0, 1]
    const s = Math.min(Math.max(t, 0), 1) * (VIRIDIS.length - 1), i = Math.min(Math.floor(s), VIRIDIS.length - 2);
    return VIRIDIS[i].map((c, k) => Math.round(c + (s - i) * (VIRIDIS[i + 1][k] - c)));
  }

  function landscape(T) {  // F* on the grid as a PNG data URL (low = dark), darkest to the 90th percentile
    const [nx, ny] = GRID, canvas = document.createElement("canvas"), vals = [];
    canvas.width = nx; canvas.height = ny;
    for (let j = 0; j < ny; j++) for (let i = 0; i < nx; i++) {
      const x = VIEW.x[0] + (i + 0.5) / nx * (VIEW.x[1] - VIEW.x[0]), y = VIEW.y[1] - (j + 0.5) / ny * (VIEW.y[1] - VIEW.y[0]);
      vals.push(freeEnergy([x, y], INSTANCE.H, INSTANCE.W, T));
    }
    const sorted = [...vals].sort((a, b) => a - b), lo = sorted[0], hi = sorted[Math.floor(0.9 * sorted.length)];
    const ctx = canvas.getContext("2d"), img = ctx.createImageData(nx, ny);
    vals.forEach((v, k) => { img.data.set([...colour((v - lo) / (hi - lo)), 255], 4 * k); });
    ctx.putImageData(img, 0, 0);
    return canvas.toDataURL();
  }

  function mount(div) {
    K.frame(div);
    const controls = K.html("div", { className: "el-controls" }, div);
    const eta = K.slider(controls, "step size η", { min: 0.05, max: 2, step: 0.05, value: 1,
                                                    format: (v) => v.toFixed(2) });
    const T = K.slider(controls, "temperature T", { min: -1, max: Math.log10(3), step: 0.001, value: INSTANCE.T,
                                                     from: (v) => Math.pow(10, v), to: Math.log10,
                                                     format: (v) => v.toPrecision(3) });
    const steps = K.slider(controls, "steps", { min: 5, max: 60, step: 1, value: 30 });
    const row = K.html("div", { className: "el-row" }, div);
    const left = K.html("div", {}, row), right = K.html("div", {}, row);
    K.legend(div, METHODS.map(([, label, c]) => [label, c]).concat([["tokens W h_i", "currentColor"]]));
    const readout = K.html("div", { className: "el-readout" }, div);
    let z0 = INSTANCE.z0, image = null, imageT = null;

    function draw() {
      const t = T.value(), e = eta.value(), n = steps.value();
      if (imageT !== t) { image = landscape(t); imageT = t; }
      const runs = METHODS.map(([m]) => descend(z0, INSTANCE.H, INSTANCE.W, t, e, n, m));
      left.replaceChildren();
      const ax = K.axes(left, { width: 400, height: 340, x: { min: VIEW.x[0], max: VIEW.x[1], label: "z₁" },
                                y: { min: VIEW.y[0], max: VIEW.y[1], label: "z₂" },
                                title: "F*(z): dark low, bright high (click to move the start)" });
      const { X0, X1, Y0, Y1 } = ax.box;
      K.svg("image", { href: image, x: X0, y: Y1, width: X1 - X0, height: Y0 - Y1, preserveAspectRatio: "none",
                       style: "image-rendering: pixelated" }, ax.layer);
      for (const h of INSTANCE.H) K.svg("path", { d: `M${ax.sx(h[0]) - 5},${ax.sy(h[1]) - 5}l10,10m0,-10l-10,10`,
                                                   stroke: "#fff", "stroke-width": 2.5 }, ax.layer);
      runs.forEach((r, k) => {
        const pts = r.states.filter((s) => s.every(Number.isFinite));
        K.curve(ax, pts, { color: "#fff", width: 4, opacity: 0.7 });
        K.curve(ax, pts, { color: METHODS[k][2], width: 2, r: 2.5 });
      });
      K.svg("circle", { cx: ax.sx(z0[0]), cy: ax.sy(z0[1]), r: 5, fill: "#fff", stroke: "#000" }, ax.layer);
      ax.svg.style.cursor = "crosshair";
      ax.svg.addEventListener("click", (ev) => {
        const pt = ax.svg.createSVGPoint();
        pt.x = ev.clientX; pt.y = ev.clientY;
        const p = pt.matrixTransform(ax.svg.getScreenCTM().inverse());
        if (p.x < X0 || p.x > X1 || p.y < Y1 || p.y > Y0) return;
        z0 = [VIEW.x[0] + (p.x - X0) / (X1 - X0) * (VIEW.x[1] - VIEW.x[0]),
              VIEW.y[0] + (Y0 - p.y) / (Y0 - Y1) * (VIEW.y[1] - VIEW.y[0])];
        draw();
      });

      right.replaceChildren();
      const all = runs.flatMap((r) => r.energies).filter(Number.isFinite), lo = Math.min(...all);
      const top = runs[0].energies[0], pad = Math.max(top - lo, 1e-3) * 0.08;
      const ex = K.axes(right, { width: 400, height: 170, x: { min: 0, max: n }, margin: { l: 56 },
                                 y: { min: lo - pad, max: top + pad, label: "F*(z_k)" },
                                 title: "free energy per step (clipped above the start's)" });
      runs.forEach((r, k) => K.curve(ex, r.energies.map((v, j) => [j, v]), { color: METHODS[k][2], r: 2.5 }));
      const gradNorm = (z) => Math.sqrt(K.sum(gradientDirection(z, INSTANCE.H, INSTANCE.W, t).map((v) => v * v)));
      const norms = runs.map((r) => r.states.map((z) => Math.max(gradNorm(z), FLOOR)));
      const finite = norms.flat().filter(Number.isFinite);
      const gx = K.axes(right, { width: 400, height: 170, x: { min: 0, max: n, label: "step k" }, margin: { l: 56 },
                                 y: { min: Math.pow(10, Math.floor(Math.log10(Math.min(...finite)))), log: true,
                                      max: Math.pow(10, Math.ceil(Math.log10(Math.max(...finite)))), label: "‖∇F*(z_k)‖" },
                                 title: "gradient norm per step (log scale)" });
      norms.forEach((v, k) => K.curve(gx, v.map((g, j) => [j, g]), { color: METHODS[k][2], r: 2.5 }));
      readout.textContent = `start z₀ = (${z0.map((v) => v.toFixed(2)).join(", ")}), η = ${e.toFixed(2)}, ` +
        `T = ${t.toPrecision(3)}, after ${n} steps: ` + runs.map((r, k) => {
          const z = r.states.at(-1), ok = z.every(Number.isFinite);
          return `${METHODS[k][0]} F* = ${ok ? r.energies.at(-1).toFixed(6) : "—"}, ‖∇F*‖ = ` +
            (ok ? gradNorm(z).toExponential(1) : "— (diverged)");
        }).join(";  ");
      div.dataset.drawn = "1";
    }

    for (const s of [eta, T, steps]) s.onChange(draw);
    draw();
  }

  window.NewtonExplorer = { freeEnergy, gradientDirection, newtonDirection, descend, INSTANCE, mount };
  K.onReady("div.newton-explorer", mount);
})();
