/* Chapter 1's free energy against temperature, computed in the page: energylab.forms.free_energy in JavaScript.
 *
 *   p_i = exp(-E_i/T) / Z                      weights(E, T)              = boltzmann_weights
 *   F*  = -T log Σ_i exp(-E_i/T)               helmholtz(E, T)            = helmholtz_free_energy
 *   F(p) = Σ_i p_i E_i + T Σ_i p_i log p_i     freeEnergyOfWeights(p, E, T) = free_energy_of_weights (0 log 0 = 0)
 *
 * with U = Σ p_i E_i, S = -Σ p_i log p_i and F = U - TS (book/notation.md), in float64. The site's smoke test
 * (scripts/smoke_site.py) checks these functions against the library on fixed energies and temperatures.
 *
 * FreeEnergyExplorer.mount(div) draws the explorer into every <div class="free-energy-explorer" data-energies="...">:
 * a temperature slider (log scale) moves the weights' bar chart and the point on the curves F*(T), U(T) live; the
 * energies can be edited. It needs explorer_kit.js and no kernel.
 */
(function () {
  "use strict";
  const K = window.ExplorerKit;

  const weights = (E, T) => K.softmax(E.map((e) => -e / T));
  const helmholtz = (E, T) => -T * K.logsumexp(E.map((e) => -e / T));
  const xlogy = (x, y) => (x === 0 ? 0 : x * Math.log(y));

  function freeEnergyOfWeights(p, E, T) {
    return K.dot(p, E) + T * K.sum(p.map((pi) => xlogy(pi, pi)));
  }

  /* Everything the figure shows at one temperature: p, U, S, F(p*) = U - TS and F* = -T log Z. */
  function state(E, T) {
    const p = weights(E, T);
    return { p, U: K.dot(p, E), S: -K.sum(p.map((pi) => xlogy(pi, pi))), F: freeEnergyOfWeights(p, E, T),
             Fstar: helmholtz(E, T) };
  }

  const T_MIN = 0.02, T_MAX = 50, GRID = 120;  // the chapter's temperatures span 0.02 to 50
  const fmt = (v) => (Math.abs(v) < 1e-3 && v !== 0 ? v.toExponential(2) : v.toFixed(4));

  function mount(div) {
    const given = (div.dataset.energies || "0.5, 1, 2").split(",").map(Number);
    K.frame(div);
    const controls = K.html("div", { className: "el-controls" }, div);
    const T = K.slider(controls, "temperature T", { min: Math.log10(T_MIN), max: Math.log10(T_MAX), step: 0.001,
                                                     value: 1, from: (v) => Math.pow(10, v), to: Math.log10,
                                                     format: (v) => v.toPrecision(3) });
    const label = K.html("label", {}, controls);
    const text = K.html("input", { type: "text", value: given.join(", ") });
    text.setAttribute("aria-label", "energies E_i");
    label.append("energies E_i", text);
    const row = K.html("div", { className: "el-row" }, div);
    const left = K.html("div", {}, row), right = K.html("div", {}, row);
    const readout = K.html("div", { className: "el-readout" }, div);
    let E = given, curves = null;

    function readEnergies() {
      const v = text.value.split(",").map((s) => s.trim()).filter(Boolean).map(Number);
      if (v.length >= 1 && v.length <= 12 && v.every(Number.isFinite)) { E = v; curves = null; text.style.outline = ""; }
      else text.style.outline = "2px solid " + K.PALETTE[1];
    }

    function draw() {
      const t = T.value(), s = state(E, t), n = E.length;
      if (!curves) {  // F*(T) and U(T) on a log grid: they change only with the energies
        const ts = Array.from({ length: GRID + 1 }, (_, k) => T_MIN * Math.pow(T_MAX / T_MIN, k / GRID));
        curves = { ts, states: ts.map((tk) => state(E, tk)) };
      }
      left.replaceChildren();
      const bx = K.axes(left, { x: { min: -0.5, max: n - 0.5, ticks: [] }, y: { min: 0, max: 1, label: "weight p_i" },
                                title: "Boltzmann weights p_i = softmax(−E_i / T)", margin: { b: 40 } });
      K.bars(bx, s.p, { labels: E.map((e, i) => `h${i + 1}`) });
      E.forEach((e, i) => { K.svg("text", { x: bx.sx(i), y: bx.box.Y0 + 28, "text-anchor": "middle", "font-size": 10,
                                            opacity: 0.7 }, bx.svg).textContent = `E=${+e.toPrecision(3)}`; });
      K.curve(bx, [[-0.5, 1 / n], [n - 0.5, 1 / n]], { color: "currentColor", width: 1, dash: "4 3", opacity: 0.6 });
      K.legend(left, [["p_i", K.PALETTE[0]], ["uniform weights 1/N (T → ∞)", "currentColor", true]]);

      right.replaceChildren();
      const lo = Math.min(...E), hi = Math.max(...E), pad = Math.max(hi - lo, 0.5);
      const fx = K.axes(right, { x: { min: T_MIN, max: T_MAX, log: true, label: "temperature T (log scale)" },
                                 y: { min: lo - 1.5 * pad, max: hi + 0.15 * pad }, title: "F*(T) = −T log Z and U(T)" });
      K.curve(fx, curves.ts.map((tk, k) => [tk, curves.states[k].U]), { color: K.PALETTE[1], dash: "6 4" });
      K.curve(fx, curves.ts.map((tk, k) => [tk, curves.states[k].Fstar]), { color: K.PALETTE[0] });
      K.curve(fx, [[T_MIN, lo], [T_MAX, lo]], { color: "currentColor", width: 1, dash: "2 3", opacity: 0.6 });
      K.curve(fx, [[t, s.Fstar], [t, s.U]], { color: K.PALETTE[2], width: 2, r: 4 });
      K.legend(right, [["F* = −T log Z", K.PALETTE[0]], ["U = Σ p_i E_i", K.PALETTE[1], true],
                       ["their gap TS", K.PALETTE[2]], ["min E_i", "currentColor", true]]);
      readout.textContent = `T = ${t.toPrecision(3)}:  F* = −T log Z = ${fmt(s.Fstar)},  U = ${fmt(s.U)},  ` +
        `S = ${fmt(s.S)} (max log N = ${Math.log(n).toFixed(4)}),  U − TS = ${fmt(s.F)}  ` +
        `(F(p*) − F* = ${(s.F - s.Fstar).toExponential(1)}: the softmax minimises F)`;
      div.dataset.drawn = "1";
    }

    T.onChange(draw);
    text.addEventListener("change", () => { readEnergies(); draw(); });
    draw();
  }

  window.FreeEnergyExplorer = { weights, helmholtz, freeEnergyOfWeights, state, mount };
  K.onReady("div.free-energy-explorer", mount);
})();
