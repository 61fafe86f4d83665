"""The Atlas: the whole catalog as data for tables, one descent check per form, and the layer of each form.

Everything here is computed from :data:`energylab.catalog.FORMS` and :mod:`energylab.layers`, so the closing
chapter of the book cannot drift from the library: a new form shows up in the table as soon as it is registered.

- :func:`form_rows` — one dict per form: name, paper, kind, LaTeX of energy and update, note, and the error of
  ``catalog.verify`` (float64): a relative error for gradient/newton forms, the relative error of the fitted
  *order* for approx forms. Forms are verified at dimension :data:`DIM`, multi-head forms at
  :data:`MULTI_HEAD_DIM`, where their samplers draw several heads (:func:`energylab.forms.heads_for`).
- :func:`descent_check` — energy before and after one small step ``x + η·update`` (the projected step
  :func:`energylab.sphere.sphere_step` for on-sphere forms), with the first-order prediction η⟨∇E, update⟩.
- :func:`layer_rows` — which ``nn.Module`` of :mod:`energylab.layers` implements which form, with its number
  of parameters.
- :func:`layer_costs` — each layer's time and saved-activation memory as ratios to fused SDPA attention, read from
  the committed benchmark ``results/bench/attention.json`` (``python -m energylab.bench attention --commit``), with
  where and when it ran; :func:`costs_caption` says so in one line, or that nothing is benchmarked yet.
- :func:`markdown_table` — a GitHub/MyST markdown table whose LaTeX cells render with MathJax (no ``|`` inside).
"""
from __future__ import annotations

import inspect
import math
import pathlib
import re

import torch

from energylab import catalog, layers  # noqa: F401 - importing the layers registers them with the catalog
from energylab._checks import check_positive
from energylab._setup import ROUND_OFF_FLOOR
from energylab.engine import committed
from energylab.models import count_parameters
from energylab.sphere import sphere_step, tangent_projection

__all__ = ["DESCENT_ETA", "DESCENT_TOL", "DIM", "MULTI_HEAD_DIM", "FAMILIES", "LAYERS", "chapter_of", "family_of",
           "bib_keys", "form_rows", "verify_dim",
           "descent_check", "layer_rows", "NOT_BENCHMARKED", "layer_costs",
           "cost_text", "costs_caption", "time_ratios_markdown",
           "markdown_table", "latex_cell", "text_cell", "error_text", "equations_markdown", "checks_markdown",
           "layers_markdown", "forms_markdown"]

DIM = 5  # the dimension at which the Atlas verifies single-head forms (a prime: no axis can hide)
MULTI_HEAD_DIM = 6  # multi-head forms: heads_for(6) = 2 heads of width d_h = 3

# Families of the Atlas chapter, title -> the bibtex keys of the papers whose forms it gathers: each forms module
# names its family (FAMILY, beside its CHAPTER), so a new family is declared where its forms are; in catalog order.
def _families() -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for form in catalog.FORMS.values():
        title = _module_family(form)
        if title is not None and form.paper not in out.setdefault(title, ()):
            out[title] += (form.paper,)
    return out


def _module_family(form: catalog.AttentionForm) -> str | None:
    """The FAMILY of the module that defines the form's update (None for a form registered elsewhere, e.g. in a
    notebook)."""
    return getattr(inspect.getmodule(form.update), "FAMILY", None)


FAMILIES: dict[str, tuple[str, ...]] = _families()

# The trainable layers, (layer class, catalog form, how the layer relates to the form), as registered beside the
# layers in energylab.layers (the catalog is their one home; this is the Atlas's view of it).
LAYERS: tuple[tuple[type, str, str], ...] = tuple(tuple(layer) for layer in catalog.LAYERS)

# What tests/forms/test_atlas.py asserts of every form, and chapter 11 states: one step of DESCENT_ETA lowers the
# energy, and the change matches its first-order prediction within DESCENT_TOL (relative; the rest is O(eta^2))
DESCENT_ETA, DESCENT_TOL = 1e-4, 0.02


def chapter_of(name: str) -> str:
    """The notebook (``NN_slug``) of the chapter that derives form ``name`` (``AttentionForm.chapter``)."""
    return _form(name).chapter


def _form(name: str) -> catalog.AttentionForm:
    if name not in catalog.FORMS:
        raise ValueError(f"name must be one of {sorted(catalog.FORMS)}, got {name!r}")
    return catalog.FORMS[name]


def family_of(name: str) -> str:
    """The family of form ``name``: its module's FAMILY, or for a form registered elsewhere (a reader's, in a
    notebook) the title in :data:`FAMILIES` whose papers include the form's paper."""
    form = _form(name)
    if _module_family(form) is not None:
        return _module_family(form)
    paper = form.paper
    titles = [title for title, papers in FAMILIES.items() if paper in papers]
    if len(titles) != 1:
        raise ValueError(f"form {name!r} (paper {paper!r}) must be in exactly one family, found {titles}")
    return titles[0]


def bib_keys(path: str | pathlib.Path) -> set[str]:
    """The citation keys of a .bib file (``@type{key,``)."""
    text = pathlib.Path(path).read_text(encoding="utf-8")
    return set(re.findall(r"^\s*@\w+\s*\{\s*([^,\s]+)\s*,", text, flags=re.M))


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def form_rows(names=None, trials: int = 3, seed: int = 0) -> list[dict]:
    """One row per form (all of FORMS by default), in registration order, with ``catalog.verify``'s error.

    Each form gets its own generator seeded with ``seed``, so a row does not depend on which rows come before.
    Keys: name, paper, family, kind, energy, update (LaTeX), note, dim (:func:`verify_dim`), chapter
    (:func:`chapter_of`), error, error_kind ("relative" | "order").
    """
    names = list(catalog.FORMS) if names is None else list(names)
    rows = []
    for name in names:
        form = _form(name)
        rows.append({
            "name": name, "paper": form.paper, "family": family_of(name), "kind": form.kind,
            "energy": form.equation.energy, "update": form.equation.update, "note": form.note,
            "dim": verify_dim(name), "chapter": chapter_of(name),
            "error": catalog.verify(name, trials=trials, generator=_generator(seed), dim=verify_dim(name)),
            "error_kind": "order" if form.kind == "approx" else "relative",
        })
    return rows


def verify_dim(name: str) -> int:
    """The dimension the Atlas samples the form at: :data:`MULTI_HEAD_DIM` for multi-head forms, else :data:`DIM`."""
    return MULTI_HEAD_DIM if _form(name).multi_head else DIM


def descent_check(name: str, eta: float = 1e-2, seed: int = 0, n_tokens: int = 7, dim: int | None = None) -> dict:
    """Energy before and after one step of size ``eta`` along the form's update, on a sampled float64 instance.

    dim defaults to :func:`verify_dim`. Off the sphere the step is x + η u; on-sphere forms take
    :func:`energylab.sphere.sphere_step` (tangent step, then back
    onto each token's sphere). Returns floats: before, after, change = after − before, and predicted = η⟨∇E, u⟩
    (for on-sphere forms ⟨∇E, P_x u⟩), the first-order change, which is < 0 for a descent direction.
    """
    form = _form(name)
    check_positive("eta", eta)
    dim = verify_dim(name) if dim is None else dim
    x, params = form.sample(n_tokens, dim, generator=_generator(seed), dtype=torch.float64)
    x = x.detach().clone().requires_grad_(True)
    energy = form.energy(x, **params)
    (grad,) = torch.autograd.grad(energy, x)
    x, before = x.detach(), float(energy.detach())
    u = form.update(x, **params)
    if form.on_sphere:
        u = tangent_projection(x, u)
        x_new = sphere_step(x, u, eta)
    else:
        x_new = x + eta * u
    after = float(form.energy(x_new, **params))
    return {"name": name, "eta": eta, "before": before, "after": after, "change": after - before,
            "predicted": eta * float((grad * u).sum())}


def layer_rows(dim: int = 64, heads: int = 4) -> list[dict]:
    """One row per layer in :data:`LAYERS`: layer, form, kind, relation, operator, parameters at (dim, heads),
    causal.

    Attention layers are built as ``cls(dim, heads)``, feedforward layers (no ``heads`` argument) as
    ``cls(dim)`` with their default hidden width. ``causal`` says whether the layer accepts ``causal=True``.
    Layers are built on the meta device: no memory, and the global random generator is left untouched.
    """
    rows = []
    for cls, name, relation in LAYERS:
        form = _form(name)
        signature = inspect.signature(cls).parameters
        with torch.device("meta"):
            layer = cls(dim, heads) if "heads" in signature else cls(dim)
            causal = "n/a"
            if "causal" in signature:
                try:
                    cls(dim, heads, causal=True)
                    causal = "yes"
                except ValueError:
                    causal = "no"
        rows.append({"layer": cls.__name__, "form": name, "kind": form.kind, "relation": relation,
                     "operator": f"{form.update.__module__}.{form.update.__name__}",
                     "parameters": count_parameters(layer), "causal": causal})
    return rows


NOT_BENCHMARKED = "not benchmarked yet"


def layer_costs(root: str | None = None) -> tuple[dict[str, dict[int, dict]], dict | None]:
    """The committed attention benchmark as ``({layer: {tokens: {"time": t, "memory": m}}}, provenance)``.

    ``t`` is the layer's forward+backward time over the SDPA reference's (median of paired runs), ``m`` the bytes
    autograd saves over the reference's; both from ``results/bench/attention.json`` (``root`` replaces the
    repository's results/ folder). A row without both numbers is left out, so its layer reads as not benchmarked.
    Without the file: ``({}, None)``.
    """
    try:
        results, provenance = committed.load_committed("bench", "attention", root=root)
    except FileNotFoundError:
        return {}, None
    costs: dict[str, dict[int, dict]] = {}
    for row in results.tables.get("attention", []):
        if all(isinstance(row.get(k), (int, float)) for k in ("tokens", "time_ratio", "saved_ratio")):
            costs.setdefault(row["layer"], {})[int(row["tokens"])] = {"time": float(row["time_ratio"]),
                                                                       "memory": float(row["saved_ratio"])}
    return costs, provenance


def cost_text(costs: dict[str, dict[int, dict]], layer: str) -> str:
    """One table cell: ``N = 256: 1.30× time, 4.50× memory; N = 1024: ...`` (ratios to SDPA, 2 decimals) or
    :data:`NOT_BENCHMARKED`."""
    by_tokens = costs.get(layer)
    if not by_tokens:
        return NOT_BENCHMARKED
    return "; ".join(f"N = {n}: {c['time']:.2f}× time, {c['memory']:.2f}× memory" for n, c in sorted(by_tokens.items()))


def time_ratios_markdown(benchmarks: dict[str, tuple], names: list[str] | None = None) -> str:
    """The time ratios to SDPA of every committed CPU benchmark side by side (``benchmarks`` from
    :func:`energylab.engine.committed.cpu_benchmarks`): a row per layer (``names``, or every layer of the first
    file but the reference), a column per file headed by its processor and instruction set, each cell
    ``N = 256 / N = 1024`` ratios in token order (two decimals; "–" where the file has no row). The cost column of
    :func:`layers_markdown` reads one file; this shows how far the ratios move between processors and instruction
    sets."""
    columns, per_file = {"layer": "layer"}, {}
    for name, (results, provenance) in benchmarks.items():
        rows = [r for r in results.tables.get("attention", []) if isinstance(r.get("time_ratio"), (int, float))]
        capability = committed.instruction_set(rows[0]) if rows else "?"
        columns[name] = f"{text_cell(provenance['machine'].get('processor', '?'))}, {capability} ({name}.json)"
        per_file[name] = {}
        for r in sorted(rows, key=lambda r: r["tokens"]):
            per_file[name].setdefault(r["layer"], []).append(f"{r['time_ratio']:.2f}")
    if names is None:
        first = next(iter(per_file.values()), {})
        names = [layer for layer in first if layer != "SDPA reference"]
    cells = [{"layer": f"`{layer}`", **{name: " / ".join(ratios.get(layer, [])) or "–"
                                        for name, ratios in per_file.items()}} for layer in names]
    return markdown_table(cells, columns)


def costs_caption(provenance: dict | None) -> str:
    """Where the cost column comes from: the benchmark's command, machine and date, or that there is none yet."""
    if provenance is None:
        return ("Cost column: no attention benchmark is committed yet (results/bench/attention.json), so every layer "
                f"reads '{NOT_BENCHMARKED}'; `python -m energylab.bench attention --commit` measures it.")
    return (f"Cost column: forward+backward time and saved activations over fused SDPA attention, from "
            f"results/bench/attention.json ({provenance.get('command', 'python -m energylab.bench attention')}); "
            f"{committed.describe_provenance(provenance)}.")


# ----------------------------------------------------------------------------- markdown
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|#])")


def text_cell(text: str) -> str:
    """Plain text for a markdown table cell: markdown punctuation escaped, so it prints as written."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


def latex_cell(latex: str) -> str:
    """Inline math for a markdown table cell. A ``|`` would end the cell before the math parser sees it, so the
    norm and absolute-value bars become ``\\Vert`` and ``\\vert`` (same glyphs)."""
    body = latex.replace(r"\|", r"\Vert{}").replace("|", r"\vert{}")
    return f"${body}$"


def markdown_table(rows: list[dict], columns: dict[str, str]) -> str:
    """A markdown table: ``columns`` maps a row key to its header; cell values must be ready-made markdown."""
    header = "| " + " | ".join(columns.values()) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(str(row[key]) for key in columns) + " |" for row in rows]
    return "\n".join([header, rule, *body])


def error_text(row: dict) -> str:
    """verify's error as inline math with two significant digits (it does not wrap), '(order)' for approx forms."""
    if row["error"] < ROUND_OFF_FLOOR:  # round-off digits vary with summation order: state the bound only
        text = f"$<10^{{{round(math.log10(ROUND_OFF_FLOOR))}}}$"
    else:
        mantissa, exponent = f"{row['error']:.1e}".split("e")
        text = f"${mantissa}\\cdot 10^{{{int(exponent)}}}$"
    return text + (" (order)" if row["error_kind"] == "order" else "")


def _cite(key: str, cite: bool) -> str:
    return f"{{cite:t}}`{key}`" if cite else text_cell(key)


def equations_markdown(rows: list[dict]) -> str:
    """First half of the Atlas table (:func:`form_rows`): form, kind, energy and update as inline math."""
    cells = [{"form": f"`{r['name']}`", "kind": r["kind"], "energy": latex_cell(r["energy"]),
              "update": latex_cell(r["update"])} for r in rows]
    return markdown_table(cells, {"form": "form", "kind": "kind", "energy": "energy $E$", "update": "update $u$"})


def checks_markdown(rows: list[dict], cite: bool = True) -> str:
    """Second half: form, paper (a MyST ``{cite:t}`` role when ``cite``), the chapter that derives it (a link to
    the notebook beside the Atlas when ``cite``), verify error, and the form's note."""
    def chapter(r):
        number = str(int(r["chapter"][:2]))
        return f"[{number}]({r['chapter']}.ipynb)" if cite else number

    cells = [{"form": f"`{r['name']}`", "paper": _cite(r["paper"], cite), "chapter": chapter(r),
              "error": error_text(r), "note": text_cell(r["note"])} for r in rows]
    return markdown_table(cells, {"form": "form", "paper": "paper", "chapter": "ch.", "error": "verify error",
                                  "note": "what is exact, identified or approximated"})


def layers_markdown(rows: list[dict], costs: dict[str, dict[int, dict]] | None = None) -> str:
    """The table of :func:`layer_rows`; with ``costs`` (from :func:`layer_costs`) a column of each layer's cost
    relative to SDPA attention, :data:`NOT_BENCHMARKED` where the benchmark has no row for it."""
    cells = [{**r, "layer": f"`{r['layer']}`", "form": f"`{r['form']}`: {text_cell(r['relation'])}",
              "parameters": f"{r['parameters']:,}", "cost": cost_text(costs or {}, r["layer"])} for r in rows]
    columns = {"layer": "layer", "parameters": "parameters", "causal": "causal",
               "form": "catalog form it implements, and how"}
    if costs is not None:
        columns["cost"] = "cost vs SDPA (time, saved memory)"
    return markdown_table(cells, columns)


def forms_markdown(summary: list[dict], baselines: dict[str, dict[str, float]] | None = None) -> str:
    """The table of :mod:`energylab.experiments.forms` (its ``tables["summary"]``): every trainable form under one
    budget, best board accuracy first; accuracies as mean ± spread over seeds, time per step as a ratio. With
    ``baselines`` (rung -> {"board", "cell"}, :func:`energylab.baselines.sudoku_rungs` on the same boards)
    the no-learning rows follow, in italics."""
    ordered = sorted(summary, key=lambda r: (-r["board"], r["layer"]))
    cells = [{"layer": f"`{r['layer']}`", "board": f"{r['board']:.3f} ± {r['board_std']:.3f}",
              "cell": f"{r['cell']:.3f} ± {r['cell_std']:.3f}", "parameters": f"{r['parameters']:,}",
              "time": f"{r['time_ratio']:.2f}"} for r in ordered]
    for rung, acc in (baselines or {}).items():
        cells.append({"layer": f"*{rung} (no learning)*", "board": f"{acc['board']:.3f}", "cell": f"{acc['cell']:.3f}",
                      "parameters": "0", "time": "–"})
    return markdown_table(cells, {"layer": "looped block", "board": "boards solved", "cell": "blank cells right",
                                  "parameters": "parameters", "time": "time per step / softmax block"})
