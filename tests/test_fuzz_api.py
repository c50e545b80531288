"""The explorer's API, fuzzed (issue 26): every registered paper's keys (from the registry) with hostile JSON
values, and malformed bodies, through the app's test client.  Every answer is 200 with finite JSON, or a
4xx whose one-line ``detail`` names the key (``parameter``) or says what the body must be.

CI-sized by default (a quarter of each paper's keys, one value each, rotated through the corpus; a twelfth
on the curve route too); ``FEDBOUND_FUZZ=long``: every key with every value on both routes (the CLI fuzz
covers every key in CI)."""

from __future__ import annotations

import itertools
import json

import pytest
from fastapi.testclient import TestClient

from fedbound import registry
from fedbound.explorer.app import create_app
from fedbound.tests._fuzz import LONG

VALUES = [None, "", 0, -1, 1e308, 1e-308, 2**63, 10**400, "nan", "abc", True, [[1.0]], {"a": 1}, "é∑", -0.0]
BODIES = [[[1, 2], [3]], "text", 3, True, {"K": {"nested": [1]}}, {"": 1}, {"x" * 10_000: 1}]


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app()) as c:
        yield c


def _check(r, key: str | None, what: str) -> None:
    assert r.status_code == 200 or 400 <= r.status_code < 500, f"{what}: {r.status_code} {r.text[:300]}"
    body = json.loads(r.text, parse_constant=lambda c: pytest.fail(f"{what}: non-finite {c} in the answer"))
    if r.status_code == 200:
        return
    detail = body["detail"]
    assert isinstance(detail, str) and "\n" not in detail and len(detail) < 2000, f"{what}: {detail!r}"
    if key is not None and body.get("parameter") != key:
        assert key in detail or "must be" in detail, f"{what}: the 4xx does not name {key}: {detail}"


def _cases():
    rotate = itertools.count()
    for name in registry.names("plan"):
        paper = registry.get(name)
        for i, key in enumerate(k["key"] for k in paper.keys()):
            if not LONG and i % 4:
                continue
            values = VALUES if LONG else [VALUES[next(rotate) % len(VALUES)]]
            for value in values:
                yield name, key, value, LONG or i % 12 == 0


CASES = list(_cases())


@pytest.mark.parametrize("name", registry.names("plan"))
def test_every_key_with_hostile_values(client, name):
    paper = registry.get(name)
    for paper_name, key, value, curve in CASES:
        if paper_name != name:
            continue
        body = {**paper.example, key: value}
        try:
            json.dumps(body, allow_nan=False)
        except ValueError:
            continue
        routes = ["/api/plan"] + (["/api/curve"] if curve and "plot" in paper.supports else [])
        for route in routes:
            r = client.post(f"{route}/{name}", json=body)
            _check(r, key if value is not None else None, f"{route}/{name} {key}={value!r}"[:200])


@pytest.mark.parametrize("body", BODIES, ids=lambda b: type(b).__name__ + str(len(json.dumps(b)))[:4])
def test_malformed_bodies(client, body):
    for name in registry.names("plan") if LONG else registry.names("plan")[:1]:
        r = client.post(f"/api/plan/{name}", json=body)
        assert 400 <= r.status_code < 500, r.text[:300]
        _check(r, None, f"plan/{name} {str(body)[:60]}")
