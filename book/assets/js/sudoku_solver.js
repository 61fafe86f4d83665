/* The book's trained looped Sudoku models, run in the page: energylab.models.looped.LoopedModel in JavaScript.
 *
 *   c = Embed(tokens) + P;   x_0 = c;   x_t = layer(x_{t-1}, c), t = 1..T;   logits_t = W_out RMSNorm(x_t)
 *
 * with the four looped layers of the league (energylab.models.looped, .recurrent, .hyperset):
 *   transformer  h = x + c;  h += MSA(RMSNorm(h));  x' = h + W_2 GELU(W_1 RMSNorm(h))
 *   itrsa        x' = RMSNorm(x + eta (c + MSA(x)))
 *   akorn        x = Pi(x);  y = c + MSA(x);  x' = Pi(x + gamma (Omega x + y - <y, x> x))   (Pi per oscillator)
 *   hyperset     x += alpha_t * -(A + A^T) Z W (bi-softmax on RMS-normalised heads);  x += gamma_t * D ReLU(RMSNorm(D^T x))
 * The weights are the float32 state_dicts of energylab.pretrained, exported by scripts/export_sudoku_js.py as
 * base64 into <name>.weights.js beside this file and loaded only on a page that has a solver. The arithmetic is
 * float64 (JavaScript numbers) on those float32 weights, with torch's float32 epsilon where torch uses it
 * (nn.RMSNorm without eps), so it follows the torch model to rounding; the site's smoke test
 * (scripts/smoke_site.py) compares every iteration's logits with torch's.
 *
 * Plain JavaScript rather than onnxruntime-web: the models are a few 4x4 boards of 16 tokens and width 64 (under a
 * million multiply-adds an iteration), so this one file of plain code replaces a multi-megabyte WebAssembly runtime, needs
 * no worker or vendored binary, and computes in float64.
 *
 * SudokuSolver.mount(div) draws a solver into every <div class="sudoku-solver" data-models="name,...">: a board to
 * edit or pick from the test boards, a model picker, the iterations T (1 ... 4x the training T), the predicted board
 * after T iterations and after every iteration t <= T with each cell's confidence (its softmax probability), and for
 * Hyper-SET its two energies E_ATTN and E_FF along the iterations.
 */
(function () {
  "use strict";

  const F32_EPS = 1.1920928955078125e-7;  // torch.finfo(torch.float32).eps: nn.RMSNorm's eps when none is given
  const HERE = (document.currentScript && document.currentScript.src || "").split("?")[0].replace(/[^/]*$/, "");
  const models = {}, pending = {};

  // ------------------------------------------------------------------ loading the exported weights
  function decode(b64) {  // base64 of little-endian float32 -> Float64Array
    const bytes = Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0));
    const view = new DataView(bytes.buffer), out = new Float64Array(bytes.length / 4);
    for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(4 * i, true);
    return out;
  }

  function loadScript(file) {
    return new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = HERE + file;
      s.onload = resolve;
      s.onerror = () => reject(new Error("could not load " + file));
      document.head.append(s);
    });
  }

  /* The model `name` ({config, w: {state_dict key: Float64Array}, record}), loading its file once. */
  function load(name) {
    if (models[name]) return Promise.resolve(models[name]);
    if (!pending[name]) {
      pending[name] = loadScript(name + ".weights.js").then(() => {
        const raw = (window.SudokuSolverData || {})[name];
        if (!raw) throw new Error("no weights registered for " + name);
        const w = {};
        for (const [k, t] of Object.entries(raw.tensors)) w[k] = decode(t.b64);
        models[name] = { name, config: raw.config, record: raw.record, w };
        return models[name];
      });
    }
    return pending[name];
  }

  // ------------------------------------------------------------------ the arithmetic (rows of (N, d) arrays)
  function linear(W, x, outDim, bias) {  // W (out, in) row-major, as torch's nn.Linear.weight
    const n = x.length, y = new Float64Array(outDim);
    for (let o = 0; o < outDim; o++) {
      let s = bias ? bias[o] : 0;
      const r = o * n;
      for (let i = 0; i < n; i++) s += W[r + i] * x[i];
      y[o] = s;
    }
    return y;
  }

  function rmsnorm(x, gain, eps) {
    let ms = 0;
    for (let i = 0; i < x.length; i++) ms += x[i] * x[i];
    const r = 1 / Math.sqrt(ms / x.length + eps), y = new Float64Array(x.length);
    for (let i = 0; i < x.length; i++) y[i] = x[i] * r * (gain ? gain[i] : 1);
    return y;
  }

  function erf(z) {  // erf(z) = 2/sqrt(pi) e^{-z^2} sum_n 2^n z^{2n+1} / (1.3.5...(2n+1)): positive terms, no cancellation
    const a = Math.abs(z);
    if (a > 6) return Math.sign(z);  // erfc(6) = 2e-17
    let term = a, sum = a;
    for (let n = 1; term > 1e-17 * sum; n++) { term *= 2 * a * a / (2 * n + 1); sum += term; }
    return Math.sign(z) * 2 / Math.sqrt(Math.PI) * Math.exp(-a * a) * sum;
  }
  const gelu = (v) => 0.5 * v * (1 + erf(v / Math.SQRT2));  // nn.GELU() (exact, not tanh)

  function softmaxInPlace(s) {
    let m = -Infinity, z = 0;
    for (const v of s) m = Math.max(m, v);
    for (let j = 0; j < s.length; j++) { s[j] = Math.exp(s[j] - m); z += s[j]; }
    for (let j = 0; j < s.length; j++) s[j] /= z;
    return s;
  }

  const add = (a, b, scale = 1) => a.map((v, i) => v + scale * b[i]);

  /* MSA(X) = concat_h softmax(q_h k_h^T / sqrt(d_h)) v_h, then W_O; q, k, v are (N, d) rows, heads side by side. */
  function attend(q, k, v, heads, Wo) {
    const N = q.length, d = q[0].length, dh = d / heads, scale = 1 / Math.sqrt(dh);
    const y = q.map(() => new Float64Array(d));
    for (let h = 0; h < heads; h++) {
      const o = h * dh;
      for (let i = 0; i < N; i++) {
        const s = new Float64Array(N);
        for (let j = 0; j < N; j++) {
          let dot = 0;
          for (let c = 0; c < dh; c++) dot += q[i][o + c] * k[j][o + c];
          s[j] = dot * scale;
        }
        softmaxInPlace(s);
        for (let j = 0; j < N; j++) for (let c = 0; c < dh; c++) y[i][o + c] += s[j] * v[j][o + c];
      }
    }
    return y.map((r) => linear(Wo, r, d));
  }

  const LAYERS = {
    transformer(m, x, c) {
      const { w, config: { dim: d, heads, ffn_mult } } = m;
      const h = x.map((r, i) => add(r, c[i]));
      const a = h.map((r) => rmsnorm(r, w["layer.norm1.weight"], F32_EPS));
      const qkv = a.map((r) => linear(w["layer.attention.qkv.weight"], r, 3 * d));  // (N, 3d): q | k | v
      const att = attend(qkv.map((r) => r.subarray(0, d)), qkv.map((r) => r.subarray(d, 2 * d)),
                         qkv.map((r) => r.subarray(2 * d)), heads, w["layer.attention.out.weight"]);
      return h.map((r, i) => {
        const h2 = add(r, att[i]);
        const f = linear(w["layer.feedforward.ff1.weight"], rmsnorm(h2, w["layer.norm2.weight"], F32_EPS), ffn_mult * d).map(gelu);
        return add(h2, linear(w["layer.feedforward.ff2.weight"], f, d));
      });
    },
    itrsa(m, x, c) {
      const { w, config: { dim: d, heads } } = m, eta = w["layer.eta"][0];
      const msa = attend(...["q", "k", "v"].map((p) => x.map((r) => linear(w[`layer.msa.${p}.weight`], r, d))),
                         heads, w["layer.msa.o.weight"]);
      return x.map((r, i) => rmsnorm(r.map((v, j) => v + eta * (c[i][j] + msa[i][j])), w["layer.norm.weight"],
                                     F32_EPS));
    },
    akorn(m, x0, c) {
      const { w, config: { dim: d, heads, oscillator: n } } = m, gamma = w["layer.gamma"][0];
      const omega = w["layer.omega"] ? w["layer.omega"][0] : null;
      const x = x0.map((r) => normalizeBlocks(r, n));
      const msa = attend(...["q", "k", "v"].map((p) => x.map((r) => linear(w[`layer.msa.${p}.weight`], r, d))),
                         heads, w["layer.msa.o.weight"]);
      return x.map((r, i) => {
        const y = add(msa[i], c[i]), out = new Float64Array(d);
        for (let b = 0; b < d; b += n) {
          let p = 0;
          for (let k = b; k < b + n; k++) p += r[k] * y[k];
          for (let k = b; k < b + n; k++) out[k] = r[k] + gamma * (y[k] - p * r[k]);
        }
        if (omega !== null) for (let k = 0; k < d; k += 2) {  // Omega x: (x_0, x_1) -> (omega x_1, -omega x_0)
          out[k] += gamma * omega * r[k + 1];
          out[k + 1] -= gamma * omega * r[k];
        }
        return normalizeBlocks(out, n);
      });
    },
    hyperset(m, x, c, t, x0) {  // c unused: the board enters through x_0 (and the step sizes)
      const { w, config: { dim: d, heads, hidden: M, eps } } = m, dh = d / heads, beta = 1 / Math.sqrt(dh);
      const [alpha, gamma] = stepSizes(m, x0, t);
      const u = hypersetAttention(w["layer.W"], x, heads, beta, eps);
      const x1 = x.map((r, i) => r.map((v, k) => v + alpha[i][k] * u[i][k]));
      return x1.map((r, i) => {  // + gamma * D ReLU(RMSNorm(D^T x))
        const h = new Float64Array(M), D = w["layer.D"];
        for (let k = 0; k < d; k++) for (let j = 0; j < M; j++) h[j] += r[k] * D[k * M + j];
        let ms = 0;
        for (const v of h) ms += v * v;
        const rho = 1 / Math.sqrt(ms / M + eps);
        return r.map((v, k) => {
          let s = 0;
          for (let j = 0; j < M; j++) if (h[j] > 0) s += h[j] * D[k * M + j];
          return v + gamma[i][k] * rho * s;
        });
      });
    },
  };

  function normalizeBlocks(x, n) {  // Pi: each block of n channels to unit norm (clamped at 1e-12 as torch)
    const y = new Float64Array(x.length);
    for (let b = 0; b < x.length; b += n) {
      let s = 0;
      for (let k = b; k < b + n; k++) s += x[k] * x[k];
      const r = Math.max(Math.sqrt(s), 1e-12);
      for (let k = b; k < b + n; k++) y[k] = x[k] / r;
    }
    return y;
  }

  /* Hyper-SET's normalised head projections q_i^h = RMSNorm(W_h x_i): (N, d) rows, heads side by side. */
  function headProjections(W, x, heads, eps) {
    const d = x[0].length, dh = d / heads;
    return x.map((r) => {
      const z = linear(W, r, d);
      for (let h = 0; h < heads; h++) z.set(rmsnorm(z.subarray(h * dh, (h + 1) * dh), null, eps), h * dh);
      return z;
    });
  }

  /* u_ATTN = -sum_h [(A + A^T) Q_h] W_h with A = softmax_row(beta Q_h Q_h^T) (catalog sign). */
  function hypersetAttention(W, x, heads, beta, eps) {
    const N = x.length, d = x[0].length, dh = d / heads, q = headProjections(W, x, heads, eps);
    const y = x.map(() => new Float64Array(d));
    for (let h = 0; h < heads; h++) {
      const o = h * dh, A = [];
      for (let i = 0; i < N; i++) {
        const s = new Float64Array(N);
        for (let j = 0; j < N; j++) {
          let dot = 0;
          for (let k = 0; k < dh; k++) dot += q[i][o + k] * q[j][o + k];
          s[j] = beta * dot;
        }
        A.push(softmaxInPlace(s));
      }
      for (let i = 0; i < N; i++) for (let j = 0; j < N; j++) {
        const a = A[i][j] + A[j][i];
        for (let k = 0; k < dh; k++) y[i][o + k] += a * q[j][o + k];
      }
    }
    return y.map((r) => {  // -(Y W): u_c = -sum_r Y_r W[r, c]
      const u = new Float64Array(d);
      for (let rr = 0; rr < d; rr++) for (let cc = 0; cc < d; cc++) u[cc] -= r[rr] * W[rr * d + cc];
      return u;
    });
  }

  /* (alpha_t, gamma_t), each (N, d): Lin(d -> 2d) GELU(c_t + RMSNorm(x_0)), c_t = Lin GELU Lin sin_e(t). */
  function stepSizes(m, x0, t) {
    const { w, config: { dim: d, time_dim: e, step_horizon } } = m, half = e / 2;
    const tt = step_horizon ? Math.min(t, step_horizon) : t, emb = new Float64Array(e);
    for (let k = 0; k < half; k++) {  // float64 in torch too, then cast to float32 (Math.fround)
      const arg = tt * Math.exp(-Math.log(10000) * k / half);
      emb[k] = Math.fround(Math.cos(arg));
      emb[half + k] = Math.fround(Math.sin(arg));
    }
    const ct = linear(w["layer.steps.time.2.weight"],
                      linear(w["layer.steps.time.0.weight"], emb, d, w["layer.steps.time.0.bias"]).map(gelu), d,
                      w["layer.steps.time.2.bias"]);
    const ab = x0.map((r) => linear(w["layer.steps.out.weight"], rmsnorm(r, null, F32_EPS).map((v, k) => gelu(v + ct[k])),
                                    2 * d, w["layer.steps.out.bias"]));
    return [ab.map((r) => r.subarray(0, d)), ab.map((r) => r.subarray(d))];
  }

  /* Hyper-SET's energies after normalisation (HyperSETLayer.energies): E_ATTN = beta^-1 sum_h sum_i logsumexp_j
   * (beta q_i^h . q_j^h), E_FF = -1/2 sum_i sum_m ReLU(RMSNorm(D^T x_i))_m^2. */
  function hypersetEnergies(m, x) {
    const { w, config: { dim: d, heads, hidden: M, eps } } = m, dh = d / heads, beta = 1 / Math.sqrt(dh);
    const q = headProjections(w["layer.W"], x, heads, eps), N = x.length;
    let attn = 0, ff = 0;
    for (let h = 0; h < heads; h++) for (let i = 0; i < N; i++) {
      const s = new Float64Array(N);
      for (let j = 0; j < N; j++) {
        let dot = 0;
        for (let k = 0; k < dh; k++) dot += q[i][h * dh + k] * q[j][h * dh + k];
        s[j] = beta * dot;
      }
      const mx = Math.max(...s);
      attn += (mx + Math.log(s.reduce((z, v) => z + Math.exp(v - mx), 0))) / beta;
    }
    for (const r of x) {
      const h = new Float64Array(M);
      for (let k = 0; k < d; k++) for (let j = 0; j < M; j++) h[j] += r[k] * w["layer.D"][k * M + j];
      const u = rmsnorm(h, null, eps);
      for (const v of u) if (v > 0) ff -= 0.5 * v * v;
    }
    return { attention: attn, feedforward: ff };
  }

  /* Run model m on tokens (N ints, 0 = blank) for T iterations: {logits: [t-1] -> (N, n) arrays after iteration t,
   * energies: {attention, feedforward} at x_0 .. x_T (Hyper-SET only)}. */
  function run(m, tokens, T) {
    const { w, config } = m, d = config.dim, n = config.size;
    if (tokens.length !== n * n) throw new Error(`a board has ${n * n} cells, got ${tokens.length}`);
    const c = tokens.map((tok, i) => {
      const r = new Float64Array(d);
      for (let k = 0; k < d; k++) r[k] = w["embed.weight"][tok * d + k] + w["pos"][i * d + k];
      return r;
    });
    const layer = LAYERS[config.family], inject = config.inject ? c : c.map((r) => r.map(() => 0));
    const logits = [], energies = config.family === "hyperset" ? { attention: [], feedforward: [] } : null;
    const record = (x) => {
      if (!energies) return;
      const e = hypersetEnergies(m, x);
      energies.attention.push(e.attention);
      energies.feedforward.push(e.feedforward);
    };
    let x = c;
    record(x);
    for (let t = 1; t <= T; t++) {
      x = layer(m, x, inject, t, c);
      logits.push(x.map((r) => Array.from(linear(w["head.weight"], rmsnorm(r, w["norm.weight"], F32_EPS), n))));
      record(x);
    }
    return { logits, energies };
  }

  // ------------------------------------------------------------------ the widget
  const STYLE = `
.sudoku-solver { border: 1px solid #ccc; border-radius: 6px; padding: 0.8em; margin: 1em 0; font-size: 0.9em; }
.sudoku-solver .ss-controls { display: flex; flex-wrap: wrap; gap: 0.4em 1.2em; margin-bottom: 0.6em; align-items: center; }
.sudoku-solver .ss-row { display: flex; flex-wrap: wrap; gap: 1.2em; align-items: flex-start; }
.sudoku-solver .ss-board { display: grid; gap: 0; border: 2px solid #333; width: max-content; }
.sudoku-solver .ss-cell { width: 2.4em; height: 2.4em; box-sizing: border-box; border: 1px solid #bbb;
  display: flex; flex-direction: column; align-items: center; justify-content: center; font-size: 1.1em; }
.sudoku-solver input.ss-cell { text-align: center; font: inherit; font-size: 1.1em; padding: 0; }
.sudoku-solver .ss-given { font-weight: bold; background: #eee; }
.sudoku-solver .ss-conf { font-size: 0.55em; color: #333; line-height: 1; }
.sudoku-solver .ss-wrong { color: #b00020; }
.sudoku-solver .ss-strip { display: flex; flex-wrap: wrap; gap: 0.6em; margin-top: 0.6em; }
.sudoku-solver .ss-mini .ss-cell { width: 1.15em; height: 1.15em; font-size: 0.7em; border-width: 0.5px; }
.sudoku-solver .ss-caption { font-size: 0.8em; text-align: center; margin-top: 0.15em; }
.sudoku-solver .ss-status { margin-top: 0.5em; }
.sudoku-solver .ss-energy { width: 100%; max-width: 40em; height: 230px; }`;

  function boxBorders(cell, i, size) {  // thicker lines between the boxes (2x2 at 4x4, 2x3 at 6x6, 3x3 at 9x9)
    const [br, bc] = { 4: [2, 2], 6: [2, 3], 9: [3, 3] }[size], r = Math.floor(i / size), col = i % size;
    if ((col + 1) % bc === 0 && col + 1 < size) cell.style.borderRight = "2px solid #333";
    if ((r + 1) % br === 0 && r + 1 < size) cell.style.borderBottom = "2px solid #333";
  }

  function unitsOf(size) {  // the rows, columns and boxes of a board, as lists of cell indices (row-major)
    const [br, bc] = { 4: [2, 2], 6: [2, 3], 9: [3, 3] }[size], units = [];
    for (let k = 0; k < size; k++) {
      units.push([...Array(size).keys()].map((j) => k * size + j), [...Array(size).keys()].map((j) => j * size + k));
      const r0 = Math.floor(k / (size / bc)) * br, c0 = (k % (size / bc)) * bc;
      units.push([...Array(size).keys()].map((j) => (r0 + Math.floor(j / bc)) * size + c0 + (j % bc)));
    }
    return units;
  }

  /* Cells that break a Sudoku rule (a digit twice in a row, column or box); for boards without a known solution. */
  function conflicts(digits, size) {
    const bad = new Set();
    for (const u of unitsOf(size)) for (const i of u) for (const j of u)
      if (i < j && digits[i] && digits[i] === digits[j]) { bad.add(i); bad.add(j); }
    return bad;
  }

  /* The no-learning baseline beside the models (energylab.baselines.propagate_boards): naked singles (a cell with one
     candidate) and hidden singles (a digit with one place in a unit), repeated until nothing changes; no guess, no
     search. Returns the digits it decides (0 elsewhere); a board whose clues contradict themselves comes back as it
     was. */
  function propagate(board, size) {
    const units = unitsOf(size), all = (1 << size) - 1, N = size * size;
    const cand = board.map((d) => (d ? 1 << (d - 1) : all));
    const single = (m) => m && !(m & (m - 1));
    for (let changed = true; changed;) {
      changed = false;
      for (const u of units) {
        for (const i of u) {
          if (!single(cand[i])) continue;
          for (const j of u) {
            if (j === i || !(cand[j] & cand[i])) continue;
            cand[j] &= ~cand[i];
            if (!cand[j]) return board.slice();
            changed = true;
          }
        }
        for (let d = 0; d < size; d++) {
          const where = u.filter((i) => cand[i] & (1 << d));
          if (!where.length) return board.slice();
          if (where.length === 1 && cand[where[0]] !== 1 << d) { cand[where[0]] = 1 << d; changed = true; }
        }
      }
    }
    return [...Array(N).keys()].map((i) => (single(cand[i]) ? Math.log2(cand[i]) + 1 : 0));
  }

  function predicted(logits) {  // (N, n) -> {digit, conf} per cell: argmax and its softmax probability
    return logits.map((row) => {
      const p = softmaxInPlace(Float64Array.from(row));
      let k = 0;
      for (let j = 1; j < p.length; j++) if (p[j] > p[k]) k = j;
      return { digit: k + 1, conf: p[k] };
    });
  }

  function drawBoard(target, size, cells, mini) {
    target.replaceChildren();
    target.className = "ss-board" + (mini ? " ss-mini" : "");
    target.style.gridTemplateColumns = `repeat(${size}, auto)`;
    cells.forEach((c, i) => {
      const el = document.createElement("div");
      el.className = "ss-cell" + (c.given ? " ss-given" : "") + (c.wrong ? " ss-wrong" : "");
      if (!c.given && c.conf !== undefined) el.style.background = `rgba(46, 125, 50, ${(0.08 + 0.5 * c.conf).toFixed(3)})`;
      el.append(String(c.digit || ""));
      if (!mini && !c.given && c.conf !== undefined) {
        const conf = document.createElement("span");
        conf.className = "ss-conf";
        conf.textContent = (100 * c.conf).toFixed(0) + "%";
        el.append(conf);
      }
      el.title = c.given ? "given" : c.conf !== undefined ? `${c.digit} with probability ${c.conf.toFixed(3)}` : "";
      boxBorders(el, i, size);
      target.append(el);
    });
  }

  function labelled(text, input) {
    const l = document.createElement("label");
    l.append(text + " ", input);
    return l;
  }

  async function mount(div) {
    if (!document.getElementById("sudoku-solver-style")) {
      const st = document.createElement("style");
      st.id = "sudoku-solver-style";
      st.textContent = STYLE;
      document.head.append(st);
    }
    const names = (div.dataset.models || "").split(",").map((s) => s.trim()).filter(Boolean);
    const state = { model: names[0], T: 0, board: null, solution: null };
    const modelSel = document.createElement("select"), boardSel = document.createElement("select");
    const slider = Object.assign(document.createElement("input"), { type: "range", min: 1, step: 1 });
    const tOut = document.createElement("output"), clear = Object.assign(document.createElement("button"),
                                                                         { type: "button", textContent: "clear" });
    modelSel.name = "model"; boardSel.name = "board"; slider.name = "iterations";
    const controls = document.createElement("div");
    controls.className = "ss-controls";
    controls.append(labelled("model", modelSel), labelled("board", boardSel), clear,
                    labelled("iterations T", slider), tOut);
    const input = document.createElement("div"), final = document.createElement("div");
    const strip = document.createElement("div"), status = document.createElement("div");
    const energy = document.createElement("div");
    strip.className = "ss-strip"; status.className = "ss-status"; energy.className = "ss-energy";
    const col = (title, el) => {
      const c = document.createElement("div"), h = document.createElement("div");
      h.textContent = title;
      c.append(h, el);
      return c;
    };
    const finalTitle = document.createElement("span");
    const row = document.createElement("div");
    row.className = "ss-row";
    row.append(col("puzzle (type 1-4, empty = blank)", input), col("", final));
    row.lastChild.firstChild.replaceWith(finalTitle);
    const stripTitle = document.createElement("div");
    stripTitle.style.marginTop = "0.6em";
    stripTitle.textContent = "the prediction after every iteration t (shade: confidence; red: wrong)";
    div.replaceChildren(controls, row, status, stripTitle, strip, energy);

    // the first prediction needs only the boards and the first model; the others load after it, in the background
    const options = names.map((name) => new Option(name + " (loading)", name));
    options.forEach((o) => modelSel.add(o));
    const label = (m) => {
      const acc = m.record.accuracy, T = m.config.iterations;
      options[names.indexOf(m.name)].text =
        `${m.config.label} (${(100 * acc["4x4-id"][String(T)].board).toFixed(1)}% of test boards at T = ${T})`;
      return m;
    };
    const [boardData] = await Promise.all([loadBoards(), load(names[0]).then(label)]);
    const size = boardData.size, N = size * size;
    for (const [set, label] of [["4x4-id", "in-distribution"], ["4x4-ood", "out-of-distribution"]])
      boardData.sets[set].puzzles.forEach((p, k) => boardSel.add(new Option(`${label} #${k + 1}`, `${set}:${k}`)));
    boardSel.add(new Option("your own (edit the puzzle)", "own"));
    const inputs = [...Array(N).keys()].map((i) => {
      const el = Object.assign(document.createElement("input"), { className: "ss-cell", maxLength: 1,
                                                                 inputMode: "numeric", ariaLabel: `cell ${i + 1}` });
      boxBorders(el, i, size);
      el.addEventListener("input", () => {
        const v = el.value.replace(new RegExp(`[^1-${size}]`, "g"), "").slice(-1);
        el.value = v;
        state.board[i] = v ? +v : 0;
        state.solution = null;
        boardSel.value = "own";
        refresh();
      });
      return el;
    });
    input.className = "ss-board";
    input.style.gridTemplateColumns = `repeat(${size}, auto)`;
    input.append(...inputs);

    function setBoard(value) {
      if (value === "own") return;
      const [set, k] = value.split(":");
      state.board = [...boardData.sets[set].puzzles[+k]].map(Number);
      state.solution = [...boardData.sets[set].solutions[+k]].map(Number);
    }
    function setModel(name) {
      const m = models[name], T = m.config.iterations;
      state.model = name;
      slider.max = 4 * T;
      if (!state.T || state.T > 4 * T) state.T = T;
      slider.value = state.T;
    }
    modelSel.addEventListener("change", () => load(modelSel.value).then((m) => { setModel(m.name); refresh(); }));
    boardSel.addEventListener("change", () => { setBoard(boardSel.value); refresh(); });
    slider.addEventListener("input", () => { state.T = +slider.value; refresh(); });
    clear.addEventListener("click", () => {
      state.board = new Array(N).fill(0); state.solution = null; boardSel.value = "own"; refresh();
    });

    function cellsAt(logits) {
      const pred = predicted(logits), given = state.board;
      const digits = pred.map((p, i) => given[i] || p.digit);
      const bad = state.solution ? null : conflicts(digits, size);
      return pred.map((p, i) => given[i] ? { digit: given[i], given: true }
        : { digit: p.digit, conf: p.conf, wrong: state.solution ? p.digit !== state.solution[i] : bad.has(i) });
    }

    function refresh() {
      const m = models[state.model], T = state.T, T0 = m.config.iterations;
      inputs.forEach((el, i) => { el.value = state.board[i] || ""; el.classList.toggle("ss-given", !!state.board[i]); });
      tOut.value = `${T} (trained at ${T0})`;
      const t0 = performance.now(), out = run(m, state.board, T), ms = performance.now() - t0;
      const boards = out.logits.map(cellsAt);
      finalTitle.textContent = `prediction after T = ${T} iterations`;
      drawBoard(final, size, boards[T - 1], false);
      strip.replaceChildren(...boards.map((cells, k) => {
        const c = document.createElement("div"), b = document.createElement("div"), cap = document.createElement("div");
        drawBoard(b, size, cells, true);
        const wrong = cells.filter((x) => x.wrong).length;
        cap.className = "ss-caption";
        cap.textContent = `t=${k + 1}` + (wrong ? ` \u2717${wrong}` : " \u2713");
        c.append(b, cap);
        return c;
      }));
      const last = boards[T - 1], wrong = last.filter((x) => x.wrong).length;
      const blanks = state.board.filter((v) => !v).length;
      const firstRight = boards.findIndex((cells) => !cells.some((x) => x.wrong));
      const decided = propagate(state.board, size).filter((v, i) => v && !state.board[i]).length;
      status.textContent = (wrong ? `${wrong} of ${blanks} blank cells ${state.solution ? "wrong" : "break a rule"}`
        : `solved: every blank cell ${state.solution ? "matches the solution" : "fits the rules"}`)
        + (firstRight >= 0 ? ` (first right after t = ${firstRight + 1})` : "")
        + ` \u00b7 ${T} iterations of ${m.config.label} computed in ${ms.toFixed(0)} ms in your browser`
        + ` \u00b7 propagation alone (no learning, no search) ${decided === blanks ? "solves this board"
          : `fills ${decided} of ${blanks} blank cells`}`;
      if (out.energies && window.Plotly) {
        energy.style.display = "";
        const ts = out.energies.attention.map((_, t) => t);
        window.Plotly.react(energy, [
          { x: ts, y: out.energies.attention, name: "E_ATTN", mode: "lines+markers", line: { color: "#1f77b4" } },
          { x: ts, y: out.energies.feedforward, name: "E_FF", mode: "lines+markers", yaxis: "y2",
            line: { color: "#ff7f0e" } }],
          { title: { text: "Hyper-SET's energies along the iterations (this board; dotted: the trained T)",
                     font: { size: 13 } },
            margin: { l: 60, r: 60, t: 30, b: 36 }, xaxis: { title: { text: "iteration t" } },
            yaxis: { title: { text: "E_ATTN (blue)" } },
            yaxis2: { title: { text: "E_FF (orange)" }, overlaying: "y", side: "right" }, showlegend: false,
            // the dotted line: the T the model was trained at
            shapes: [{ type: "line", x0: T0, x1: T0, yref: "paper", y0: 0, y1: 1, line: { dash: "dot", width: 1 } }] },
          { displayModeBar: false, responsive: true });
      } else {
        energy.style.display = "none";
      }
      div.sudokuSolverState = { model: state.model, T, board: state.board.slice(), ms };
      // ms from the start of navigation to the first prediction drawn (the smoke test reports it)
      if (!div.dataset.firstPrediction) div.dataset.firstPrediction = performance.now().toFixed(0);
    }

    setModel(state.model);
    setBoard(boardSel.value);
    refresh();
    names.slice(1).forEach((name) => load(name).then(label));
  }

  let boardsPromise = null;
  function loadBoards() {  // {size, sets: {set: {puzzles, solutions}}}: a few of energylab.pretrained's test boards
    boardsPromise = boardsPromise || loadScript("sudoku4-boards.js").then(() => window.SudokuSolverBoards);
    return boardsPromise;
  }

  window.SudokuSolver = { load, run, mount, erf, loadBoards, propagate };
  const start = () => document.querySelectorAll("div.sudoku-solver").forEach((div) => mount(div).catch((err) => {
    div.textContent = "The Sudoku solver could not start: " + err.message;
    console.error(err);
  }));
  // after the load event: the weights it fetches then do not hold back the page's own load (a long chapter, or the
  // single-page book that scripts/build_pdf.py prints, must not wait for them)
  if (document.readyState === "complete") start();
  else window.addEventListener("load", start);
})();
