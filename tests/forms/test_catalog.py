"""Every catalog form: operator = autograd (gradient / newton), stated order (approx), descent, sphere steps."""
import dataclasses

import pytest
import torch

from energylab import catalog
from energylab import sphere as sp
from energylab.forms import free_energy as fe

GRADIENT = [n for n, f in catalog.FORMS.items() if f.kind == "gradient"]
NEWTON = [n for n, f in catalog.FORMS.items() if f.kind == "newton"]
APPROX = [n for n, f in catalog.FORMS.items() if f.kind == "approx"]
SIZES = [(7, 5), (11, 3), (5, 13), (7, 15)]  # (n_tokens, dim); dim 15 gives 3 heads of size 5


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def test_required_forms_are_registered():
    assert catalog.FORMS["att2nd"].kind == "newton"
    assert catalog.FORMS["att2nd1st"].kind == "approx" and catalog.FORMS["mha2nd1st"].kind == "approx"
    assert catalog.FORMS["mha2nd"].kind == "newton" and catalog.FORMS["mha2nd1st-corrected"].reference == "mha2nd"
    assert catalog.FORMS["mha2nd1st"].reference == "mha2nd-paper"
    for name, form in catalog.FORMS.items():
        assert form.name == name and form.paper and form.equation.energy and form.equation.update


@pytest.mark.parametrize("name", sorted(catalog.FORMS))
def test_every_form_is_named_in_the_chapter_that_derives_it(name):
    """The catalog entry is the form's home: its chapter (the Atlas links there) exists and names it in code or
    prose, so a form renamed or moved without its chapter fails here, with no list of forms typed into tests."""
    import pathlib

    form = catalog.FORMS[name]
    (notebook,) = pathlib.Path(__file__).resolve().parents[2].joinpath("notebooks").glob(f"{form.chapter}.ipynb")
    text = notebook.read_text()
    assert any(quoted in text for quoted in (f'\\"{name}\\"', f"'{name}'", f"`{name}`")), (name, form.chapter)


def test_layers_are_registered_on_their_forms():
    from energylab import layers

    assert catalog.LAYERS and {layer.form for layer in catalog.LAYERS} <= set(catalog.FORMS)
    for layer in catalog.LAYERS:
        assert issubclass(layer.cls, torch.nn.Module) and layer.relation
        assert layer in catalog.FORMS[layer.form].layers
        assert getattr(layers, layer.cls.__name__) is layer.cls
    with pytest.raises(ValueError, match="already registered"):
        catalog.register_layer(*catalog.LAYERS[0])
    with pytest.raises(ValueError, match="no form 'nope' is registered"):
        catalog.register_layer(layers.MultiHeadAttention, "nope", "x")


def test_a_form_without_its_chapter_is_refused():
    import dataclasses

    form = dataclasses.replace(catalog.FORMS["att2nd"], name="att2nd-copy", chapter="")
    with pytest.raises(ValueError, match="needs the chapter that derives it"):
        catalog.register(form)
    assert "att2nd-copy" not in catalog.FORMS


@pytest.mark.parametrize("name", GRADIENT)
@pytest.mark.parametrize("n_tokens,dim", SIZES)
def test_gradient_forms_match_autograd(name, n_tokens, dim):
    err = catalog.verify(name, trials=3, generator=_gen(n_tokens * dim), n_tokens=n_tokens, dim=dim)
    assert err < catalog.EXACT_TOL, f"{name}: relative error {err:.3g}"


@pytest.mark.parametrize("name", NEWTON)
@pytest.mark.parametrize("n_tokens,dim", SIZES)
def test_newton_forms_match_hessian_solve(name, n_tokens, dim):
    err = catalog.verify(name, trials=2, generator=_gen(n_tokens + dim), n_tokens=n_tokens, dim=dim)
    assert err < catalog.NEWTON_TOL, f"{name}: relative error {err:.3g}"


@pytest.mark.parametrize("name", APPROX)
def test_approx_forms_have_their_stated_order(name):
    form = catalog.FORMS[name]
    assert form.reference in catalog.FORMS and form.order >= 1
    for n_tokens, dim in SIZES:
        err = catalog.verify(name, trials=3, generator=_gen(dim), n_tokens=n_tokens, dim=dim)
        assert err < catalog.ORDER_TOL, f"{name}: fitted order off by {err:.3g} relative to {form.order}"


def test_order_fit_detects_a_first_order_approximation():
    # plain gradient descent −∇F* approximates the Newton direction only to first order in the correction
    fake = dataclasses.replace(catalog.FORMS["att2nd1st"], name="gd_as_newton", update=fe.softmax_free_energy_update)
    x, params = fake.sample(7, 5, generator=_gen(0))
    assert abs(catalog.approx_slope(fake, x, params) - 1.0) < 0.05
    assert abs(catalog.approx_slope(catalog.FORMS["att2nd1st"], x, params) - 2.0) < 0.05


@pytest.mark.parametrize("name", GRADIENT)
def test_gradient_forms_descend(name):
    form = catalog.FORMS[name]
    x, params = form.sample(7, 5, generator=_gen(11))
    e0 = float(form.energy(x, **params))
    u = form.update(x, **params)
    for eps in (1e-3, 1e-4):
        y = sp.sphere_step(x, u, eps) if form.on_sphere else x + eps * u
        assert float(form.energy(y, **params)) < e0, f"{name} does not descend at eps={eps}"


def test_sphere_step_stays_on_sphere():
    g = _gen(0)
    x = torch.randn(7, 5, generator=g, dtype=torch.float64)
    u = torch.randn(7, 5, generator=g, dtype=torch.float64)
    y = sp.sphere_step(x, u, 0.3)
    assert (y.norm(dim=-1) - x.norm(dim=-1)).abs().max() < 1e-12
    assert (sp.tangent_projection(x, u) * x).sum(-1).abs().max() < 1e-12
    assert (y - x).abs().max() > 1e-3  # it moved


def test_verify_bad_input():
    with pytest.raises(ValueError, match="name"):
        catalog.verify("no_such_form")
    with pytest.raises(ValueError, match="trials"):
        catalog.verify("softmax_free_energy", trials=0)


def test_paper_keys_are_in_the_bibliography():
    import pathlib
    import re

    bib = pathlib.Path(__file__).resolve().parents[2] / "book" / "references.bib"
    if not bib.exists():
        pytest.skip("book/references.bib not present in this checkout")
    keys = set(re.findall(r"^@\w+\{([^,]+),", bib.read_text(), flags=re.M))
    assert {f.paper for f in catalog.FORMS.values()} <= keys


@pytest.mark.parametrize("name", [n for n, f in catalog.FORMS.items() if f.on_sphere])
def test_on_sphere_forms_stay_on_the_sphere(name):
    form = catalog.FORMS[name]
    x, params = form.sample(11, 5, generator=_gen(5))
    u = form.update(x, **params)
    assert (u * x).sum(-1).abs().max() < 1e-12  # the update is tangent
    y = x
    for _ in range(20):
        y = sp.sphere_step(y, form.update(y, **params), 0.1)
    assert (y.norm(dim=-1) - 1).abs().max() < 1e-12
    assert float(form.energy(y, **params)) < float(form.energy(x, **params))
