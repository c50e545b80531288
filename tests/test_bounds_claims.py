"""Every declared claim of every registered paper, checked by the one generic checker, driven by hypothesis.

The list comes from the paper registry (fedbound.registry): a newly registered paper's claims are tested here
without editing this file.  Where a claim holds, hypothesis draws points of its region and the check must
pass; where the paper's claim fails, every declared counterexample must fail the check.  Both halves are
proved for every claim.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings

from fedbound import registry
from fedbound.bounds import nbafl as nb
from fedbound.bounds.claims import Claim, Computed, Region, check_all, check_claim, check_point

ALL = [(name, c) for name in registry.names("claims") for c in registry.get(name).all_claims()]
CLAIMS = [c for name, c in ALL if name == "nbafl"]
REGION_CLAIMS = [(name, c) for name, c in ALL if c.region is not None]
FAILING = [(name, c) for name, c in ALL if c.counterexamples]


def _examples(claim: Claim) -> int:
    return 8 if isinstance(claim.quantity, Computed) else 20


def _id(item) -> str:
    return f"{item[0]}:{item[1].id}"


def test_every_paper_with_claims_declares_them_uniquely():
    assert registry.names("claims"), "at least one registered paper declares claims"
    for name in registry.names("claims"):
        ids = [c.id for c in registry.get(name).all_claims()]
        assert ids and len(ids) == len(set(ids)), f"{name}: duplicate claim ids"


@pytest.mark.parametrize("item", REGION_CLAIMS, ids=_id)
def test_claim_holds_on_its_region(item):
    _, claim = item
    @settings(max_examples=_examples(claim))
    @given(claim.region.strategy())
    def run(point):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            verdict = check_point(claim, point)
        assert verdict.holds, f"{claim.id} fails at {point}: {verdict.detail}"

    run()


@pytest.mark.parametrize("item", FAILING, ids=_id)
def test_counterexamples_refute_the_paper_claim(item):
    _, claim = item
    assert claim.fails_in
    for point, variant in claim.counterexamples:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            verdict = check_point(claim, point, variant)
        assert not verdict.holds, f"{claim.id}: counterexample {point} [{variant}] does not fail"


def test_expected_claims_are_declared():
    ids = {c.id for c in CLAIMS}
    for needed in ["S1", "S3a", "S10", "S11", "S12a", "S13", "S13b", "S14", "S15a", "S16", "S17", "S18",
        "S19a",
                   "S21", "S22a", "S23a", "S24", "S25", "S26", "R5"]:
        assert needed in ids
    assert {c.id for name, c in FAILING if name == "nbafl"} >= {"S14", "S24", "R5", "S26"}


def test_deterministic_report_for_the_cli():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reports = check_all([nb.CLAIMS_BY_ID[i] for i in ("S10", "S14", "R5")], n=5)
    status = {r.id: r.status for r in reports}
    assert status == {"S10": "holds", "S14": "fails in region", "R5": "fails in region"}
    assert "beta=10" in reports[1].counterexample and "K = 11" in reports[2].counterexample


def test_checker_detects_a_false_declaration():
    """A wrong claim ("h increases in eps") must be reported as contradicted, not silently passed."""
    wrong = Claim("X", "h increases in eps", nb.BOUND, "increasing", nb.ADMISSIBLE, wrt="eps")
    report = check_claim(wrong, n=3)
    assert report.status == "CONTRADICTED"
    assert "derivative" in report.detail or "not increasing" in report.detail
    not_unimodal = Claim("Y", "h_K unimodal in T at K = 40", nb.K_BOUND, "unimodal",
                         Region(points=({**nb.TV1, "K": 40},)), wrt="T", line=(38.0, 150.0), line_points=200)
    assert check_claim(not_unimodal, n=1).status == "CONTRADICTED"
    bogus_counter = Claim("Z", "h decreasing in eps", nb.BOUND, "decreasing", None, wrt="eps",
                          line=(1.0, 100.0), fails_in="nowhere", counterexamples=((nb.TV1, "paper"),))
    assert check_claim(bogus_counter).status == "CONTRADICTED"


def test_claim_kinds_on_simple_functions():
    sq = Computed("square", lambda v, variant: np.asarray(v["x"], float) ** 2 - 4 * np.asarray(v["x"], float))
    region = Region({"x": (0.0, 10.0)})
    assert check_point(Claim("u", "", sq, "unimodal", region, wrt="x"), {"x": 1.0}).holds
    assert not check_point(Claim("i", "", sq, "increasing", region, wrt="x"), {"x": 1.0}).holds
    interior = Claim("m", "", sq, "interior_minimum", region, wrt="x", line=(0, 10))
    assert check_point(interior, {"x": 1.0}).holds
    edge = Claim("m2", "", sq, "interior_minimum", region, wrt="x", line=(3, 10))
    assert not check_point(edge, {"x": 1.0}).holds
    with pytest.raises(ValueError, match="kind"):
        Claim("bad", "", sq, "convex-ish", region)
