"""``fedbound reproduce``'s two non-training kinds: bound figures (a claim about the bound's formula) and
predicted-vs-measured figures (``fedbound validate`` judged for agreement in shape).

Every registered figure of these kinds runs at its tiny size; its files and verdict format are asserted, and
the verdicts are checked against independent computations: the moments of UDP Fig. 2 by a binomial sum
(scipy), NbAFL Fig. 7's curve against spec 002's regression vectors, the rank verdict against hand-made
runs."""

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy.special import comb, logsumexp

from fedbound.registry import get, papers
from fedbound.tests._reproduce_helpers import check_files, tiny_results
from fedbound.validation.reproduce import Target, Uncovered, find, reproduce, targets
from fedbound.validation.reproduce.bound import BoundFigure
from fedbound.validation.reproduce.validate import ValidateFigure, shape_verdict

OTHER = [t for t in targets() if not isinstance(t, Target | Uncovered)]
IDS = [f"{t.paper}-{t.figure}" for t in OTHER]
BOUND_LINE = re.compile(r"^(?P<paper>\w+) (?P<fig>\S+): (?P<id>\S+) (holds at (?P<k>\d+)/(?P<n>\d+) checked "
                        r"points(; fails only where declared \(.+\): \d+/\d+ counterexamples confirmed)?"
                        r"|does not hold \(at \d+/\d+ checked points\); counterexample: .+): .+$")
SEED_LINE = re.compile(r"^(?P<paper>\w+) (?P<fig>\S+): (?P<id>\S+) (holds in \d+/\d+ seeds, effect size \S+ "
                       r"\(95 % interval [^)]+\)|does not hold \(in \d+/\d+ seeds\), effect size \S+ \(95 % "
                       r"interval [^)]+\); mean \w+: .+): .+$")
SCHEMA = {"paper", "figure", "title", "scale", "kind", "x", "metric", "labels", "cases", "runs", "failed",
          "csv", "png", "svg", "claims"}
CLAIM_KEYS = {"id", "statement", "kind", "metric", "better", "holds", "seeds_holding", "seeds", "effect",
              "low", "high", "values", "line"}
T975 = {2: 4.302652729911275}
"""Student-t 97.5 % quantile for 2 degrees of freedom (tables)."""


def test_both_kinds_are_registered():
    kinds = {t.kind for t in OTHER}
    assert kinds == {"bound", "predicted vs measured"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Every bound and predicted-vs-measured figure at its tiny size, in one call."""
    return tiny_results(OTHER, tmp_path_factory.mktemp("kinds"))


@pytest.mark.parametrize("target", OTHER, ids=IDS)
def test_every_figure_runs_tiny_and_writes_its_files(tiny, target):
    _, results = tiny
    result = results[(target.paper, target.figure)]
    doc = check_files(result, target)
    assert SCHEMA <= set(doc)
    assert [c["id"] for c in doc["claims"]] == [i for i, _ in target.statements()]
    assert all(CLAIM_KEYS <= set(c) for c in doc["claims"])
    table = pd.read_csv(result.files["csv"])
    assert {*doc["labels"], doc["metric"]} <= set(table.columns)
    pattern = BOUND_LINE if target.kind == "bound" else SEED_LINE
    lines = result.lines()
    assert len(lines) == len(doc["claims"]) + len(result.notes)  # notes: a theorem's premises, the shape
    assert doc.get("notes", []) == result.notes
    for line, claim in zip(lines, doc["claims"], strict=False):
        m = pattern.match(line)
        assert m, line
        assert (m["paper"], m["fig"], m["id"]) == (target.paper, target.figure, claim["id"])
        assert claim["line"] == line.split(": ", 1)[1]


def _exact(lam, q, s):
    """ln D_10 of UDP (Wei et al. 2021), eq. (14), second line: a binomial sum, computed here by scipy."""
    n = int(lam) + 1
    ell = np.arange(n + 1)
    with np.errstate(divide="ignore"):
        logs = np.log(comb(n, ell)) + (n - ell) * np.log1p(-q) + ell * np.log(q) + ell * (ell - 1) * s**2 / 2
    return float(logsumexp(logs))


def _approx(lam, q, s):
    """UDP eq. (15): q lambda (lambda + 1) Delta_l^2 / (2 sigma^2)."""
    return q * lam * (lam + 1) * s**2 / 2


def test_udp_fig2_moments_and_verdict_against_an_independent_computation(tiny):
    _, results = tiny
    result = results[("udp", "fig2")]
    table = pd.read_csv(result.files["csv"])
    exact = table[table["series"] == "exact (14)"]
    bound = table[table["series"] == "bound (15)"]
    assert len(exact) == len(bound) == 300
    for (_, e), (_, b) in zip(exact.iterrows(), bound.iterrows(), strict=True):
        assert e["log_moment"] == pytest.approx(_exact(e["lam"], e["q"], e["s"]), rel=1e-9)
        assert b["log_moment"] == pytest.approx(_approx(b["lam"], b["q"], b["s"]), rel=1e-12)
    # spec 003 Sec. 6, Fig. 2 reproduction (panel a: q = 0.9, s = 0.025; panel c: s = 0.05)
    a = exact[(exact["q"] == 0.9) & (exact["s"] == 0.025)].set_index("lam")["log_moment"]
    assert a[1.0] == pytest.approx(5.0628e-4, rel=1e-4) and a[100.0] == pytest.approx(2.57081, rel=1e-5)
    # the verdict: (15) >= (14) at every point checked, recomputed here at the same points
    target = find("udp", "fig2")
    claim = next(c for c in get("udp").all_claims() if c.id == "P4")
    random = claim.region.sample(target.tiny_points, 0)
    above = [all(_approx(lam, c["q"], c["s"]) >= _exact(lam, c["q"], c["s"]) * (1 - 1e-12)
                 for lam in target.x_values) for c in target.curves]  # one point per curve of the figure
    above += [_approx(p["lam"], p["q"], p["s"]) >= _exact(p["lam"], p["q"], p["s"]) * (1 - 1e-12)
              for p in random]
    doc = json.loads(result.files["verdicts"].read_text())["claims"][0]
    assert (doc["seeds_holding"], doc["seeds"]) == (sum(above), len(above))
    assert doc["holds"] == all(above)
    for point, _ in claim.counterexamples:  # declared failures: (15) below (14) there
        assert _approx(point["lam"], point["q"], point["s"]) < _exact(point["lam"], point["q"], point["s"])
    assert doc["counterexamples_confirmed"] == len(claim.counterexamples)


H_EPS60 = {1: 1.938085481, 5: 1.720281538, 10: 1.507757676, 20: 1.24216324, 25: 1.172207265,
           34: 1.125557213, 35: 1.125628442, 50: 1.221068693, 100: 2.204531775}
T_STAR = {50.0: 30, 60.0: 34, 80.0: 42, 100.0: 48}
"""spec 002 Sec. 8, extra regression vectors: h(T) at eps = 60 (TV1) and the integer T* of the Fig. 7-like
table."""


def test_nbafl_fig7_curve_is_the_spec_bound_and_its_claims_hold(tiny):
    _, results = tiny
    result = results[("nbafl", "fig7")]
    table = pd.read_csv(result.files["csv"])
    at60 = table[table["eps"] == 60.0].set_index("T")["bound"]
    for T, h in H_EPS60.items():
        assert at60[float(T)] == pytest.approx(h, rel=1e-8)
    argmin = {eps: int(g.loc[g["bound"].idxmin(), "T"]) for eps, g in table.groupby("eps")}
    assert argmin == T_STAR  # interior minimum in T (S13), growing with eps (S15a)
    doc = json.loads(result.files["verdicts"].read_text())
    assert [(c["id"], c["holds"]) for c in doc["claims"]] == [("S13", True), ("S15a", True)]


def _runs(gaps):
    """gaps: {seed: [gap at T = 1, 2, 3, 4]}"""
    return pd.DataFrame([{"seed": s, "T": float(t), "gap": g} for s, row in gaps.items()
                         for t, g in zip((1, 2, 3, 4), row, strict=True)])


def test_shape_verdict_per_seed_rank_correlation_and_interval():
    x, bound = np.array([1.0, 2.0, 3.0, 4.0]), np.array([4.0, 3.0, 2.0, 2.5])  # ranks 4 3 1 2
    # seed 0: same order (rho 1); seed 1: ranks 4 3 2 1 (rho 0.8); seed 2: reversed ranks 1 2 4 3 (rho -1)
    v = shape_verdict("F", "agree", "T", x, bound, _runs({0: [9, 5, 1, 2], 1: [9, 5, 2, 1], 2: [1, 2, 9, 5]}))
    rhos = np.array([1.0, 0.8, -1.0])
    half = T975[2] * rhos.std(ddof=1) / math.sqrt(3)
    assert (v.holds, v.seeds_holding, v.seeds) == (True, 2, 3)
    # the interval is clipped to a correlation's range [-1, 1] (issue 26 item 9)
    assert v.effect == pytest.approx(rhos.mean()) and v.low == pytest.approx(max(-1.0, rhos.mean() - half))
    assert v.high == pytest.approx(min(1.0, rhos.mean() + half))
    assert SEED_LINE.match("nbafl fig8: " + v.line())
    flat = shape_verdict("F", "agree", "T", x, bound, _runs({0: [1, 1, 1, 1], 1: [1, 2, 9, 5]}))
    assert (flat.holds, flat.seeds_holding, flat.effect) == (False, 0, pytest.approx(-0.5))
    assert "does not hold" in flat.line()


def test_a_bound_figure_naming_an_undeclared_claim_is_a_one_line_error(tmp_path):
    from fedbound.errors import ConfigError

    bad = BoundFigure("udp", "figX", "x", ("P99",), {"s": 0.1}, "lam", (1.0, 2.0), (), "y")
    with pytest.raises(ConfigError, match="P99 are not declared"):
        reproduce(bad, tmp_path, scale="tiny")


@pytest.mark.parametrize("name", [p.name for p in papers().values() if p.reproduce])
def test_every_figure_claim_of_every_paper_gets_a_verdict(name):
    entries = targets(name)
    assert not [u.figure for u in entries if isinstance(u, Uncovered)]
    assert all(isinstance(t, Target | BoundFigure | ValidateFigure) for t in entries)


def test_dppfl_fig4_paper_scale_is_resnet18_on_cifar10_and_names_the_missing_batch(tmp_path):
    from fedbound.errors import ConfigError

    target = find("dppfl", "fig4")
    assert target.paper_scale.dataset == "cifar10"
    assert 'train.model="resnet18"' in target.paper_scale.overrides
    assert "stand-in" in target.title and "CNN" in target.title
    with pytest.raises(ConfigError, match="missing CIFAR-10 batch 'data_batch_1'"):
        reproduce(target, tmp_path / "out", scale="paper", data=tmp_path)
