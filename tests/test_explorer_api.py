"""The explorer's JSON API (fedbound.explorer) through FastAPI's test client: the CLI's JSON, the registry's
domains, one-line 422s naming the parameter.

Parametrised over fedbound.registry: a newly registered paper is checked here without editing this file.
"""

import json

import pytest
from fastapi.testclient import TestClient

from fedbound import registry
from fedbound.cli import main
from fedbound.explorer import api
from fedbound.explorer.app import create_app

PLANNERS = list(registry.names("plan"))
PLOTTERS = list(registry.names("plot"))
CLAIMS = list(registry.names("claims"))
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app()) as c:
        yield c


def _sets(values):
    """The ``--set`` arguments a user types for a setting."""
    return [a for k, v in values.items() for a in ("--set", f"{k}={v}")]


def _cli_json(capsys, *argv):
    capsys.readouterr()
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_papers_is_the_cli_json(client, capsys):
    r = client.get("/api/papers")
    assert r.status_code == 200
    assert r.json() == _cli_json(capsys, "papers", "--json")


@pytest.mark.parametrize("name", PLANNERS)
def test_plan_is_exactly_the_cli_json(client, capsys, name):
    example = dict(registry.get(name).example)
    r = client.post(f"/api/plan/{name}", json=example)
    assert r.status_code == 200, r.text
    assert r.json() == _cli_json(capsys, "plan", name, *_sets(example), "--json")


VARIANTS = [(name, v) for name in PLANNERS if registry.get(name).theorems
            for v in registry.get(name).variants()]


@pytest.mark.parametrize(("name", "variant"), VARIANTS)
def test_every_variant_answers_as_the_cli(client, capsys, name, variant):
    """A named reading plans exactly as ``--variant`` does, or is refused with the CLI's one-line error."""
    example = dict(registry.get(name).example)
    r = client.post(f"/api/plan/{name}", params={"variant": variant}, json=example)
    capsys.readouterr()
    code = main(["plan", name, *_sets(example), "--variant", variant, "--json"])
    out, err = capsys.readouterr()
    if r.status_code == 200:
        assert code == 0 and r.json() == json.loads(out) and r.json()["variant"] == variant
    else:
        assert r.status_code == 422 and code == 2, r.text
        assert r.json()["detail"] in err.replace("\n", " ")


@pytest.mark.parametrize("name", PLOTTERS)
def test_curve_draws_the_lines_of_fedbound_plot(client, capsys, tmp_path, name):
    paper = registry.get(name)
    vs = next(iter(paper.load("plots")))
    r = client.post(f"/api/curve/{name}", params={"vs": vs}, json=dict(paper.example))
    assert r.status_code == 200, r.text
    fig = r.json()
    cli = _cli_json(capsys, "plot", name, *_sets(paper.example), "--vs", vs, "--out", str(tmp_path / "f.png"),
                    "--json")
    # plot --json lists every labelled line of two or more points (reference lines included)
    lines = [{k: c[k] for k in ("label", "x", "y")} for c in fig["curves"]]
    refs = {h["label"] for h in fig["hlines"] + fig["vlines"] if h["label"]}
    assert lines == [c for c in cli["curves"] if c["label"] not in refs]
    assert fig["title"] and fig["xlabel"] and fig["vs"] == vs
    assert any(v is not None for c in fig["curves"] for v in c["y"])


@pytest.mark.parametrize("name", PLOTTERS)
def test_every_plot_variable_answers(client, name):
    paper = registry.get(name)
    for vs in paper.load("plots"):
        r = client.post(f"/api/curve/{name}", params={"vs": vs}, json=dict(paper.example))
        assert r.status_code == 200, (vs, r.text)
        fig = r.json()
        assert fig["xscale"] in ("linear", "log") and fig["yscale"] in ("linear", "log")
        for c in fig["curves"] + fig["points"]:
            assert len(c["x"]) == len(c["y"]) and c["color"].startswith("#")


def _out_of_domain(field):
    """A value just outside a numeric field's domain, or None when the field is unbounded."""
    if field.low is not None:
        return field.low if field.low_open else field.low - 1
    if field.high is not None:
        return field.high if field.high_open else field.high + 1
    return None


@pytest.mark.parametrize("name", PLANNERS)
def test_out_of_domain_values_are_422_naming_the_key(client, name):
    paper = registry.get(name)
    checked = 0
    for field in paper.config_section.fields:
        bad = _out_of_domain(field) if field.kind in (int, float) else None
        if bad is None:
            continue
        body = {**paper.example, field.name: bad}
        for route in ("plan", "curve"):
            r = client.post(f"/api/{route}/{name}", json=body)
            assert r.status_code == 422, (field.name, r.text)
            err = r.json()
            assert err["parameter"] == field.name
            assert field.name in err["detail"] and "valid range" in err["detail"]
            assert "\n" not in err["detail"]
        checked += 1
    assert checked >= 3


@pytest.mark.parametrize("name", PLANNERS)
def test_bad_input_is_one_line_naming_the_parameter(client, name):
    paper = registry.get(name)
    example = dict(paper.example)
    key = next(k for k in example if paper.config_section.field(k).kind in (int, float))
    cases = [
        ({**example, key: "many"}, {}, key),
        ({**example, key: True}, {}, key),
        ({**example, "no_such_key": 1}, {}, "no_such_key"),
        (example, {"variant": "no_such_reading"}, "variant"),
        ([1, 2], {}, None),
    ]
    required = [k["key"] for k in paper.keys() if k["required"]]
    if required:
        cases.append(({k: v for k, v in example.items() if k != required[0]}, {}, required[0]))
    for body, params, parameter in cases:
        r = client.post(f"/api/plan/{name}", json=body, params=params)
        assert r.status_code == 422, (body, r.text)
        err = r.json()
        assert err["parameter"] == parameter, err
        assert err["detail"] and "\n" not in err["detail"]
        if parameter:
            assert parameter in err["detail"]


def test_unknown_paper_and_plot_variable(client):
    r = client.post("/api/plan/no_such_paper", json={})
    assert r.status_code == 404 and r.json()["parameter"] == "paper"
    name = PLOTTERS[0]
    example = dict(registry.get(name).example)
    r = client.post(f"/api/curve/{name}", params={"vs": "no_such_axis"}, json=example)
    assert r.status_code == 422 and r.json()["parameter"] == "vs"
    assert all(vs in r.json()["detail"] for vs in registry.get(name).load("plots"))


def test_a_body_that_is_not_json_is_a_one_line_422(client):
    r = client.post(f"/api/plan/{PLANNERS[0]}", content=b"{eps: ", headers=JSON)
    assert r.status_code == 422
    assert "\n" not in r.json()["detail"]


def test_nan_and_huge_numbers_never_reach_the_formulas(client):
    name = PLANNERS[0]
    example = dict(registry.get(name).example)
    for text in ("NaN", "Infinity", "1e400"):
        body = json.dumps(example)[:-1] + f', "eps": {text}}}'
        r = client.post(f"/api/plan/{name}", content=body.encode(), headers=JSON)
        assert r.status_code == 422, (text, r.text)
        assert r.json()["parameter"] == "eps"


def test_claims_are_the_cli_json_with_explorer_links(client, capsys):
    """One paper (the one with the fewest declared claims: checking claims takes seconds per paper)."""
    name = min(CLAIMS, key=lambda n: len(registry.get(n).all_claims()))
    got = client.get(f"/api/claims/{name}").json()
    links = [c.pop("explore") for c in got["claims"]]
    assert got == _cli_json(capsys, "claims", name, "--json")
    assert links == api.counterexample_links(name)


@pytest.mark.parametrize("name", CLAIMS)
def test_counterexample_links_open_settings_of_the_paper(name):
    from urllib.parse import parse_qsl

    paper = registry.get(name)
    keys = set(paper.config_section.keys())
    links = api.counterexample_links(name)
    declared = paper.all_claims()
    assert [len(per) for per in links] == [len(c.counterexamples) for c in declared]
    for claim, per in zip(declared, links, strict=True):
        for (point, variant), query in zip(claim.counterexamples, per, strict=True):
            if query is None:
                given = {k: v for k, v in point.items() if v is not None}
                scalars = all(isinstance(v, int | float | str) for v in given.values())
                assert not (set(given) <= keys and scalars)
                continue
            pairs = dict(parse_qsl(query))
            assert pairs.pop("paper") == name and pairs.pop("variant") == variant
            assert set(pairs) <= keys and all(float(pairs[k]) == float(point[k]) for k in pairs
                                              if isinstance(point[k], int | float))


@pytest.mark.parametrize("name", PLANNERS)
def test_form_lists_every_key_with_its_domain(client, name):
    paper = registry.get(name)
    form = client.get(f"/api/form/{name}").json()
    assert [f["key"] for f in form["fields"]] == paper.config_section.keys()
    assert form["example"] == json.loads(json.dumps(dict(paper.example)))
    assert form["variants"][0] == "paper"
    for f, key in zip(form["fields"], paper.keys(), strict=False):
        assert f["domain"] == key["domain"] and f["meaning"] == key["meaning"]


def test_the_page_and_its_scripts_are_served_locally(client):
    from plotly.offline import get_plotlyjs

    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "http://" not in page.text and "https://" not in page.text.replace('href="/docs"', "")
    for src in ("/static/plotly.min.js", "/static/explorer.js", "/static/explorer.css"):
        assert f'"{src}"' in page.text
        assert client.get(src).status_code == 200
    assert client.get("/static/plotly.min.js").text == get_plotlyjs()
    assert client.get("/static/api.py").status_code == 404
    assert client.get("/static/..%2Fapi.py").status_code == 404


def test_openapi_documents_the_routes(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/api/papers", "/api/plan/{paper}", "/api/curve/{paper}", "/api/claims/{paper}"} <= set(paths)


def test_serve_rejects_a_bad_port_in_one_line(capsys):
    assert main(["serve", "--port", "70000"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--port" in err and "70000" in err and "\n" not in err


def test_the_page_opens_on_a_planning_paper_and_its_variant_control_is_not_a_config_key():
    """Without ?paper= the page opens on the paper README and the docs walk through, which must be registered
    and plan; the formula-variant selector's label must not read like a paper's config key (DP-PFL has a
    ``variant`` key of its own, shown as a field of the setting)."""
    import re
    from importlib import resources

    static = resources.files("fedbound.explorer") / "static"
    start = re.search(r'const START_PAPER = "(\w+)"', (static / "explorer.js").read_text()).group(1)
    assert "plan" in registry.get(start).supports
    label = re.search(r'<label for="variant">([^<]+)</label>', (static / "index.html").read_text()).group(1)
    keys = {k for p in registry.papers().values() for k in p.config_section.keys()}
    assert "variant" in keys and label.strip() not in keys


def test_claims_are_checked_once_per_code_version(monkeypatch, tmp_path):
    """The claims view is kept across runs (it takes seconds): a new process reads it back, the same JSON."""
    from fedbound.bounds import claims as claims_module

    monkeypatch.setenv("FEDBOUND_CACHE_DIR", str(tmp_path))
    name = min(CLAIMS, key=lambda n: len(registry.get(n).all_claims()))
    calls = []
    real = claims_module.check_all
    monkeypatch.setattr(claims_module, "check_all", lambda *a, **k: calls.append(1) or real(*a, **k))
    api.claims_json.cache_clear()
    first = api.claims_json(name)
    api.claims_json.cache_clear()  # as a new process
    again = api.claims_json(name)
    api.claims_json.cache_clear()
    assert again == first and len(calls) == 1
