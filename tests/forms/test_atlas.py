"""The Atlas data: every form in the table with a resolvable citation, descent of every form, the layer map."""
import pathlib

import pytest
import torch

from energylab import atlas, catalog
from energylab.engine import committed
from energylab.forms import expressive as ea
from energylab.forms import free_energy as fe
from energylab.forms import hopfield as hf
from energylab.viz.atlas import verify_errors_figure

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIB = ROOT / "book" / "references.bib"


@pytest.fixture(scope="module")
def rows():
    return atlas.form_rows(trials=2, seed=3)


def test_every_form_appears_once(rows):
    assert [r["name"] for r in rows] == list(catalog.FORMS)
    assert len(rows) >= 19


def test_every_paper_key_is_in_the_bibliography():
    keys = atlas.bib_keys(BIB)
    assert "energyprinciple2025" in keys and "hu2025hyperset" in keys  # the parser reads the real file
    missing = {n: f.paper for n, f in catalog.FORMS.items() if f.paper not in keys}
    assert not missing, f"paper keys not in book/references.bib: {missing}"


def test_bib_keys_parser(tmp_path):
    bib = tmp_path / "x.bib"
    bib.write_text("@misc{alpha2020,\n title={A}}\n  @Article{ beta_1 ,\n}\n% @misc{not a key}\n")
    assert atlas.bib_keys(bib) == {"alpha2020", "beta_1"}


def test_rows_carry_the_catalog_and_pass_the_test_bounds(rows):
    for r in rows:
        form = catalog.FORMS[r["name"]]
        assert (r["paper"], r["kind"], r["note"]) == (form.paper, form.kind, form.note)
        assert r["energy"] == form.equation.energy and r["update"] == form.equation.update
        if form.kind == "approx":
            assert r["error_kind"] == "order" and r["error"] < 0.05
        else:
            assert r["error_kind"] == "relative" and r["error"] < 1e-10


def test_rows_do_not_depend_on_order():
    a = atlas.form_rows(["att2nd1st", "hopfield_retrieval"], trials=1, seed=5)
    b = atlas.form_rows(["hopfield_retrieval", "att2nd1st"], trials=1, seed=5)
    assert a[0]["error"] == b[1]["error"] and a[1]["error"] == b[0]["error"]


def test_families_partition_the_catalog():
    titles = [atlas.family_of(n) for n in catalog.FORMS]
    assert set(titles) == set(atlas.FAMILIES)  # no empty family
    assert atlas.family_of("sphere_interaction") == atlas.family_of("symmetric_self_attention")
    assert atlas.family_of("att2nd") == atlas.family_of("softmax_free_energy") != atlas.family_of("hyperset_attention")



def test_a_family_is_declared_beside_its_forms_and_a_readers_form_joins_its_papers(monkeypatch):
    """Every forms module names its family (FAMILY, beside CHAPTER): a new family needs no line elsewhere. A form
    registered outside the forms modules (a reader's, in a notebook) joins the family of its paper."""
    import dataclasses
    import importlib
    import pkgutil

    import energylab.forms as forms

    modules = [importlib.import_module(f"energylab.forms.{m.name}") for m in pkgutil.iter_modules(forms.__path__)
               if not m.name.startswith("_")]
    assert {m.FAMILY for m in modules} == set(atlas.FAMILIES)
    assert list(atlas.FAMILIES)[0] == "Free energies and Newton forms"  # catalog order: chapter 1's first
    readers = dataclasses.replace(catalog.FORMS["linear_attention"], name="readers_form",
                                  update=lambda *a, **k: None)  # defined here, not in a forms module
    monkeypatch.setitem(catalog.FORMS, "readers_form", readers)
    assert atlas.family_of("readers_form") == atlas.family_of("linear_attention")
    orphan = dataclasses.replace(readers, name="orphan_form", paper="nobody2026")
    monkeypatch.setitem(catalog.FORMS, "orphan_form", orphan)
    with pytest.raises(ValueError, match="exactly one family"):
        atlas.family_of("orphan_form")


@pytest.mark.parametrize("name", list(catalog.FORMS))
def test_every_form_descends_at_first_order(name):
    small = atlas.descent_check(name, eta=atlas.DESCENT_ETA, seed=7, n_tokens=5, dim=6)
    assert small["after"] < small["before"], f"{name}: energy rose"
    assert small["predicted"] < 0
    assert abs(small["change"] - small["predicted"]) < atlas.DESCENT_TOL * abs(small["predicted"])  # O(eta^2) remainder


def test_descent_check_on_sphere_keeps_norms():
    r = atlas.descent_check("sphere_interaction", eta=0.5)
    assert r["change"] < 0
    with pytest.raises(ValueError, match="eta"):
        atlas.descent_check("sphere_interaction", eta=0.0)
    with pytest.raises(ValueError, match="name"):
        atlas.descent_check("no_such_form")


def test_layer_rows_parameter_counts():
    d, h = 12, 3
    rows = {r["layer"]: r for r in atlas.layer_rows(dim=d, heads=h)}
    assert rows["MultiHeadAttention"]["parameters"] == 4 * d * d
    assert rows["ExpressiveAttention"]["parameters"] == 4 * d * d
    assert rows["MHA2nd1st"]["parameters"] == 3 * d * d + 2 * h
    assert rows["BiSoftmaxAttention"]["parameters"] == d * d
    assert rows["GatedEnergyFeedforward"]["parameters"] == d * 4 * d
    assert rows["MultiHeadAttention"]["causal"] == "yes" and rows["SigmoidAttention"]["causal"] == "no"
    assert rows["ReLUEnergyFeedforward"]["causal"] == "n/a"
    assert rows["MHA2nd1st"]["operator"] == "energylab.forms.newton.mha2nd1st_update"


def test_every_layer_is_mapped_to_a_form():
    import importlib
    import pkgutil

    from energylab import layers

    mapped = {cls.__name__ for cls, _, _ in atlas.LAYERS}
    # the forms' own layer modules: those that register a layer with the catalog (found, not listed, so that a new
    # family needs no line here); each must register every layer it exports
    modules = [importlib.import_module(f"energylab.layers.{m.name}") for m in pkgutil.iter_modules(layers.__path__)]
    registered = [c for c, _, _ in atlas.LAYERS]
    families = [m for m in modules if any(getattr(m, name, None) is c for name in getattr(m, "__all__", ())
                                          for c in registered)]
    assert len(families) >= 5
    assert mapped == {name for m in families for name in m.__all__}
    assert all(name in catalog.FORMS and relation for _, name, relation in atlas.LAYERS)


def test_layer_rows_leave_the_global_generator_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    atlas.layer_rows(dim=8, heads=2)
    assert torch.equal(torch.rand(3), expected)


def test_markdown_cells_have_no_bare_pipes():
    cell = atlas.latex_cell(r"\|z - W h_i\|^2 + |s|")
    assert "|" not in cell and cell == r"$\Vert{}z - W h_i\Vert{}^2 + \vert{}s\vert{}$"
    assert atlas.text_cell("F* = a|b_c") == r"F\* = a\|b\_c"
    table = atlas.markdown_table([{"a": cell, "b": "x"}, {"a": "1", "b": "2"}], {"a": "A", "b": "B"})
    lines = table.splitlines()
    assert len(lines) == 4 and {line.count("|") for line in lines} == {3}


def test_verify_errors_figure():
    fig = verify_errors_figure(["f", "g", "h"], [0.0, 1e-15, 3e-3], ["gradient", "newton", "approx"])
    # round-off-level errors are drawn at the floor and labelled as below it (reproducible figure JSON)
    assert len(fig.data) == 3 and fig.data[0].y[0] == 1e-12 and fig.data[0].customdata[0] == "< 1e-12"
    assert fig.data[1].y[0] == 1e-12 and fig.data[2].y[0] == 3e-3 and fig.data[2].customdata[0] == "3.0e-03"
    assert fig.layout.yaxis.type == "log"
    with pytest.raises(ValueError, match="names"):
        verify_errors_figure(["f"], [0.0, 1.0], ["gradient"])
    with pytest.raises(ValueError, match="kinds"):
        verify_errors_figure(["f"], [0.0], ["other"])


def test_chapter_claims_hopfield_and_expressive():
    # equal-norm patterns, T = 1/beta, W = I: the Hopfield update is the elastic free-energy update
    g = torch.Generator().manual_seed(1)
    X = 1.3 * torch.nn.functional.normalize(torch.randn(11, 7, generator=g, dtype=torch.float64), dim=-1)
    xi = torch.randn(5, 7, generator=g, dtype=torch.float64)
    hop = hf.hopfield_update(xi, X, 0.7)
    ela = fe.softmax_free_energy_update(xi, X, torch.eye(7, dtype=torch.float64), 1 / 0.7)
    assert (hop - ela).abs().max() < 1e-12
    # the full retrieval step (eta = 1) lowers the Hopfield energy
    assert atlas.descent_check("hopfield_retrieval", eta=1.0, seed=2)["change"] < 0
    # the EA layer is not a descent direction of F_EA: the cosine with -grad F_EA takes both signs
    _, params = catalog.FORMS["expressive_attention"].sample(7, 5, generator=torch.Generator().manual_seed(0))
    z = torch.randn(200, 5, generator=g, dtype=torch.float64)
    layer = ea.expressive_attention_step(z, params["H"], params["W"], params["W"]) - z
    cos = torch.nn.functional.cosine_similarity(
        layer, ea.expressive_free_energy_update(z, params["H"], params["W"], params["T"]), dim=-1)
    assert cos.min() < -0.1 and cos.max() > 0.1


def test_both_table_halves_list_every_form(rows):
    equations = atlas.equations_markdown(rows).splitlines()
    checks = atlas.checks_markdown(rows).splitlines()
    assert len(equations) == len(checks) == len(catalog.FORMS) + 2
    for line_e, line_c, name in zip(equations[2:], checks[2:], catalog.FORMS):
        assert line_e.startswith(f"| `{name}` |") and line_c.startswith(f"| `{name}` |")
        assert line_e.count(" | ") == 3 and "$" in line_e  # 4 cells, math inside, no stray pipe
    assert "{cite:t}`hu2025hyperset`" in atlas.checks_markdown(rows)
    assert "{cite" not in atlas.checks_markdown(rows, cite=False)
    assert "(order)" in atlas.checks_markdown(rows)


def test_layers_markdown():
    table = atlas.layers_markdown(atlas.layer_rows(dim=64, heads=4)).splitlines()
    assert len(table) == len(atlas.LAYERS) + 2
    assert table[4].startswith("| `MHA2nd1st` | 12,296 | yes | `mha2nd1st`: the form with W\\_O learned")


def test_error_text():
    assert atlas.error_text({"error": 3.14e-16, "error_kind": "relative"}) == r"$<10^{-12}$"
    assert atlas.error_text({"error": 0.0, "error_kind": "relative"}) == r"$<10^{-12}$"
    assert atlas.error_text({"error": 2.5e-9, "error_kind": "relative"}) == r"$2.5\cdot 10^{-9}$"
    assert atlas.error_text({"error": 0.0172, "error_kind": "order"}) == r"$1.7\cdot 10^{-2}$ (order)"


def _heads_of(params: dict) -> int:
    """Heads of a sampled instance: the leading axis of (H, d_h, d) weights, 1 when it has none."""
    weights = [w for w in params.values() if isinstance(w, torch.Tensor) and w.dim() == 3]
    return weights[0].shape[0] if weights else 1


@pytest.mark.parametrize("name", list(catalog.FORMS))
def test_atlas_verifies_multi_head_forms_with_several_heads(name):
    form = catalog.FORMS[name]
    _, params = form.sample(7, atlas.verify_dim(name), generator=torch.Generator().manual_seed(0))
    heads = _heads_of(params)
    assert (heads >= 2) == form.multi_head, f"{name}: {heads} head(s) at dim {atlas.verify_dim(name)}"
    if form.multi_head:
        assert atlas.verify_dim(name) == atlas.MULTI_HEAD_DIM


def test_atlas_rows_use_several_heads_for_every_multi_head_form(rows):
    names = {n for n, f in catalog.FORMS.items() if f.multi_head}
    assert len(names) >= 2  # the flag itself is checked against the samplers in the test above
    for row in rows:
        form = catalog.FORMS[row["name"]]
        _, params = form.sample(7, row["dim"], generator=torch.Generator().manual_seed(0))
        assert (_heads_of(params) >= 2) == (row["name"] in names), row["name"]


def test_forms_table_and_figure_order_and_format():
    from energylab.viz.atlas import forms_figure

    summary = [{"layer": "form-mha", "board": 0.5, "board_std": 0.05, "cell": 0.9, "cell_std": 0.01,
                "parameters": 20000, "time_ratio": 1.0, "seeds": 3},
               {"layer": "derived-cauchy", "board": 0.625, "board_std": 0.0, "cell": 0.93, "cell_std": 0.002,
                "parameters": 15000, "time_ratio": 3.04, "seeds": 3}]
    lines = atlas.forms_markdown(summary).splitlines()
    assert lines[2] == "| `derived-cauchy` | 0.625 ± 0.000 | 0.930 ± 0.002 | 15,000 | 3.04 |"
    assert lines[3] == "| `form-mha` | 0.500 ± 0.050 | 0.900 ± 0.010 | 20,000 | 1.00 |"
    fig = forms_figure(summary)
    assert list(fig.data[0].x) == [1.0, 3.04] and list(fig.data[0].error_y.array) == [0.05, 0.0]
    with pytest.raises(ValueError, match="at least one row"):
        forms_figure([])


def test_every_form_links_the_chapter_that_derives_it():
    import pathlib

    notebooks = pathlib.Path(atlas.__file__).resolve().parents[1] / "notebooks"
    for name in catalog.FORMS:
        assert (notebooks / f"{atlas.chapter_of(name)}.ipynb").exists(), name
    assert atlas.chapter_of("att2nd") == "04_newton_attention"
    assert atlas.chapter_of("hyperset_attention") == "08_hyperset"
    assert atlas.chapter_of("generalised_symmetric_sa") == "09_jacobians"
    rows = atlas.form_rows(["expressive_attention"], trials=1)
    assert "| [5](05_expressive_attention.ipynb) |" in atlas.checks_markdown(rows)
    assert "| 5 |" in atlas.checks_markdown(rows, cite=False)


# ----------------------------------------------------------------------------- the cost column (issue 19)
def _bench_file(root, rows):
    from energylab.engine.committed import commit_results
    from energylab.engine.results import Results

    record = Results("bench", {"section": "attention", "quick": False}, tables={"attention": rows})
    return commit_results(record, "bench", "attention", root=str(root), seconds=12.0,
                          command="python -m energylab.bench attention --commit")


def test_layer_costs_read_the_committed_benchmark(tmp_path):
    rows = [{"layer": "SDPA reference", "tokens": 256, "time_ratio": 1.0, "saved_ratio": 1.0},
            {"layer": "ExpressiveAttention", "tokens": 1024, "time_ratio": 1.789, "saved_ratio": 14.02},
            {"layer": "ExpressiveAttention", "tokens": 256, "time_ratio": 1.304, "saved_ratio": 4.5},
            {"layer": "MHA2nd1st", "tokens": 256, "time_ratio": 2.68},  # no memory: not a usable row
            {"layer": "SomethingNew", "tokens": 256, "time_ratio": 0.9, "saved_ratio": 1.0}]
    _bench_file(tmp_path, rows)
    costs, provenance = atlas.layer_costs(root=str(tmp_path))
    assert costs["ExpressiveAttention"] == {256: {"time": 1.304, "memory": 4.5},
                                            1024: {"time": 1.789, "memory": 14.02}}
    assert "MHA2nd1st" not in costs
    assert atlas.cost_text(costs, "ExpressiveAttention") == ("N = 256: 1.30× time, 4.50× memory; "
                                                             "N = 1024: 1.79× time, 14.02× memory")
    table = atlas.layers_markdown(atlas.layer_rows(dim=16, heads=2), costs)
    by_layer = {line.split("|")[1].strip(" `"): line for line in table.splitlines()[2:]}
    assert set(by_layer) == {cls.__name__ for cls, _, _ in atlas.LAYERS}
    assert "N = 1024: 1.79× time, 14.02× memory" in by_layer["ExpressiveAttention"]
    for name in by_layer.keys() - {"ExpressiveAttention"}:
        assert by_layer[name].rstrip(" |").endswith(atlas.NOT_BENCHMARKED), name
    caption = atlas.costs_caption(provenance)
    assert provenance["date"][:10] in caption and provenance["machine"]["processor"] in caption


def test_layer_costs_without_a_benchmark(tmp_path):
    costs, provenance = atlas.layer_costs(root=str(tmp_path))
    assert costs == {} and provenance is None
    assert "no attention benchmark is committed yet" in atlas.costs_caption(None)
    table = atlas.layers_markdown(atlas.layer_rows(dim=16, heads=2), costs)
    assert table.count(atlas.NOT_BENCHMARKED) == len(atlas.LAYERS)
    assert "cost vs SDPA" not in atlas.layers_markdown(atlas.layer_rows(dim=16, heads=2))  # no costs, no column


def test_the_atlas_shows_the_numbers_of_the_committed_file():
    """The executed chapter's layer table against results/bench/attention.json, read here with json alone."""
    import json

    nb = json.loads((ROOT / "notebooks" / "11_atlas.ipynb").read_text(encoding="utf-8"))
    markdown = ["".join(out.get("data", {}).get("text/markdown", "")) for cell in nb["cells"]
                if cell["cell_type"] == "code" for out in cell.get("outputs", [])]
    tables = [text for text in markdown if "cost vs SDPA" in text]
    printed = "".join("".join(out.get("text", "")) for cell in nb["cells"] if cell["cell_type"] == "code"
                      for out in cell.get("outputs", []) if out.get("output_type") == "stream")
    assert len(tables) == 1, "the Atlas must show one layer table with the cost column"
    rows = {line.split("|")[1].strip(" `"): line for line in tables[0].splitlines()[2:]}
    path = ROOT / "results" / "bench" / "attention.json"
    if not path.exists():
        assert all(line.rstrip(" |").endswith(atlas.NOT_BENCHMARKED) for line in rows.values())
        assert "no attention benchmark is committed yet" in printed
        return
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["provenance"]["date"][:10] in printed and data["provenance"]["machine"]["processor"] in printed
    measured = {}
    for r in data["tables"]["attention"]:
        if r["layer"] in rows and "time_ratio" in r and "saved_ratio" in r:
            measured.setdefault(r["layer"], []).append(r)
            assert f"N = {r['tokens']}: {r['time_ratio']:.2f}× time, {r['saved_ratio']:.2f}× memory" in rows[r["layer"]]
    for name, line in rows.items():
        if name not in measured:
            assert line.rstrip(" |").endswith(atlas.NOT_BENCHMARKED), name


def test_the_cpu_attention_benchmarks_are_every_committed_cpu_file():
    """committed.cpu_benchmarks("attention") (chapter 8 prints each): the first benchmark and the per-processor ones of
    ``--capability``, none of the GPU files; every row of each names its instruction set or predates the column."""
    found = committed.cpu_benchmarks("attention")
    assert "attention" in found and not any("cuda" in name for name in found)
    for name, (results, provenance) in found.items():
        assert all(row["device"] == "cpu" for row in results.tables["attention"])
        if name != "attention":  # attention-<family>-<capability>
            family, capability = name.split("-")[1:]
            assert family in provenance["machine"]["processor"].lower()
            assert {row["capability"] for row in results.tables["attention"]} == {capability.upper()}


def test_the_atlas_shows_every_cpu_file_side_by_side():
    """Chapter 11's table of time ratios against the committed CPU files, read here with json alone: one column per
    file, each cell the file's ratios in token order, and each file's date printed above it."""
    import json

    nb = json.loads((ROOT / "notebooks" / "11_atlas.ipynb").read_text(encoding="utf-8"))
    outputs = [out for cell in nb["cells"] if cell["cell_type"] == "code" for out in cell.get("outputs", [])]
    tables = ["".join(out.get("data", {}).get("text/markdown", "")) for out in outputs]
    tables = [t for t in tables if t.startswith("| layer |") and ".json)" in t.splitlines()[0]]
    printed = "".join("".join(out.get("text", "")) for out in outputs if out.get("output_type") == "stream")
    assert len(tables) == 1
    header, _, *lines = tables[0].splitlines()
    names = [h.strip().rsplit("(", 1)[1].rstrip(")").removesuffix(".json") for h in header.strip("|").split("|")[1:]]
    files = sorted((ROOT / "results" / "bench").glob("attention*.json"))
    cpu = {}
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        if all(r.get("device", "cpu") == "cpu" for r in data["tables"]["attention"]):
            cpu[path.stem] = data
    assert names == list(cpu)  # in the order of their file names
    rows = {line.split("|")[1].strip(" `"): [c.strip() for c in line.strip("|").split("|")[1:]] for line in lines}
    assert "SDPA reference" not in rows and "BiSoftmaxAttention" in rows
    for column, name in enumerate(names):
        data = cpu[name]
        assert f"results/bench/{name}.json: run {data['provenance']['date'][:10]}" in printed
        for layer, cells in rows.items():
            mine = sorted((r for r in data["tables"]["attention"] if r["layer"] == layer and r.get("time_ratio")),
                          key=lambda r: r["tokens"])
            assert cells[column] == (" / ".join(f"{r['time_ratio']:.2f}" for r in mine) or "–"), (name, layer)
