"""The judge of figure claims (fedbound.validation.reproduce.claims), on hand-made runs with hand-computed
outcomes: per-seed decisions, the majority, the effect size and its Student-t interval, and the verdict
line."""

import math
import re

import pandas as pd
import pytest

from fedbound.validation.reproduce.claims import FigureClaim, judge, run_values

T975 = {1: 12.706204736174707, 2: 4.302652729911275}
"""Student-t 97.5 % quantiles for 1 and 2 degrees of freedom (tables)."""

HOLDS = re.compile(r"^\S+ holds in \d+/\d+ seeds, effect size \S+ \(95 % interval \S+ to \S+\): .+$")
FAILS = re.compile(r"^\S+ does not hold \(in \d+/\d+ seeds\), effect size \S+ \(95 % interval \S+ to \S+\); "
                   r"mean \w+: .+: .+$")


def _values(rows):
    """rows: (seed, {labels}, value)"""
    labels = list(dict.fromkeys(k for _, lab, _ in rows for k in lab))
    return pd.DataFrame([{"key": f"r{i}", "seed": s, **{k: lab.get(k) for k in labels}, "value": v}
                         for i, (s, lab, v) in enumerate(rows)], columns=["key", "seed", *labels, "value"])


def test_decreasing_majority_effect_and_interval():
    runs = [(0, {"eps": 1}, 3.0), (0, {"eps": 2}, 2.0), (0, {"eps": 3}, 1.0),   # monotone, effect 2
            (1, {"eps": 1}, 3.0), (1, {"eps": 2}, 1.0), (1, {"eps": 3}, 2.0),   # not monotone, effect 1
            (2, {"eps": 1}, 2.0), (2, {"eps": 2}, 1.5), (2, {"eps": 3}, 1.0)]   # monotone, effect 1
    v = judge(FigureClaim("D", "decreasing in eps", "decreasing", "loss", x="eps"), _values(runs))
    assert (v.holds, v.seeds_holding, v.seeds) == (True, 2, 3)
    assert v.effect == pytest.approx(4 / 3)
    half = T975[2] * math.sqrt(1 / 3) / math.sqrt(3)  # sd of (2, 1, 1) is sqrt(1/3)
    assert (v.low, v.high) == (pytest.approx(4 / 3 - half), pytest.approx(4 / 3 + half))
    assert HOLDS.match(v.line()), v.line()


def test_interior_optimum_needs_a_strict_majority():
    runs = [(0, {"K": 1}, 1.0), (0, {"K": 2}, 3.0), (0, {"K": 3}, 2.0),   # interior best by 1
            (1, {"K": 1}, 3.0), (1, {"K": 2}, 2.0), (1, {"K": 3}, 1.0)]   # an end best: -1
    v = judge(FigureClaim("I", "interior K", "interior_optimum", "accuracy", better="higher", x="K"),
              _values(runs))
    assert (v.holds, v.seeds_holding, v.seeds, v.effect) == (False, 1, 2, 0.0)
    assert v.high == pytest.approx(T975[1]) and v.low == pytest.approx(-T975[1])
    assert FAILS.match(v.line()), v.line()
    assert "K=1: 2, K=2: 2.5, K=3: 1.5" in v.line()


def test_beats_and_best_are_paired_by_seed():
    runs = [(0, {"p": "a"}, 1.0), (0, {"p": "b"}, 2.0), (0, {"p": "c"}, 1.5),
            (1, {"p": "a"}, 2.5), (1, {"p": "b"}, 2.0), (1, {"p": "c"}, 3.0),
            (2, {"p": "a"}, 1.0), (2, {"p": "b"}, 1.2), (2, {"p": "c"}, 1.1)]
    beats = judge(FigureClaim("B", "a beats b", "beats", "loss", case={"p": "a"}, other={"p": "b"}),
                  _values(runs))
    assert (beats.seeds_holding, beats.effect) == (2, pytest.approx((1.0 - 0.5 + 0.2) / 3))
    best = judge(FigureClaim("S", "a is best", "best", "loss", case={"p": "a"}), _values(runs))
    assert (best.seeds_holding, best.holds) == (2, True)
    assert best.effect == pytest.approx((0.5 - 0.5 + 0.1) / 3)
    among = judge(FigureClaim("S2", "a beats c", "best", "loss", case={"p": "a"}, among=({"p": "c"},)),
                  _values(runs))
    assert among.effect == pytest.approx((0.5 + 0.5 + 0.1) / 3)


def test_one_seed_has_no_interval_and_missing_runs_are_an_error():
    runs = [(0, {"p": "a"}, 1.0), (0, {"p": "b"}, 2.0)]
    claim = FigureClaim("B", "a beats b", "beats", "loss", case={"p": "a"}, other={"p": "b"})
    v = judge(claim, _values(runs))
    assert math.isnan(v.low) and "95 % interval n/a with one seed" in v.line()
    with pytest.raises(ValueError, match="no seed has the runs"):
        judge(FigureClaim("B", "a beats z", "beats", "loss", case={"p": "a"}, other={"p": "z"}),
              _values(runs))


def test_runs_without_the_x_label_are_left_out_of_a_monotone_claim():
    runs = [(0, {"eps": 1.0}, 2.0), (0, {"eps": 2.0}, 1.0), (0, {"private": False}, 0.5)]
    v = judge(FigureClaim("D", "decreasing", "decreasing", "loss", x="eps"), _values(runs))
    assert v.holds and v.effect == pytest.approx(1.0)


def test_run_values_average_the_last_rounds():
    table = pd.DataFrame({"key": ["a"] * 4 + ["b"] * 2, "seed": [0] * 4 + [1] * 2,
                          "eps": [1.0] * 4 + [2.0] * 2,
                          "round": [1, 2, 3, 4, 1, 2], "loss": [4.0, 3.0, 2.0, 1.0, 5.0, float("nan")]})
    out = run_values(table, "loss", ["eps"], tail=3).set_index("key")
    assert out.loc["a", "value"] == pytest.approx(2.0)
    assert out.loc["b", "value"] == pytest.approx(5.0)  # NaN rounds are not averaged
    rounds = run_values(table, "round", ["eps"], tail=3).set_index("key")
    assert list(rounds["value"]) == [4.0, 2.0]
    with pytest.raises(ValueError, match="metric 'acc' is not a column"):
        run_values(table, "acc", ["eps"])


@pytest.mark.parametrize("kw, match", [
    ({"kind": "sideways", "x": "T"}, "kind 'sideways' is outside its valid range"),
    ({"kind": "decreasing"}, "needs x"),
    ({"kind": "beats", "case": {"a": 1}}, "needs other"),
    ({"kind": "best"}, "needs case"),
    ({"kind": "best", "case": {"a": 1}, "better": "up"}, "better 'up' is outside its valid range"),
])
def test_bad_claims_are_one_line_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        FigureClaim("X", "x", metric="loss", **kw)


def test_optimum_increasing_follows_the_best_x_of_each_group():
    # seed 0: best T 15 at eps 1, 50 at eps 4 (grows by 35); seed 1: 5 then 5 (no growth);
    # seed 2: 15 at eps 1, 5 at eps 4 (falls by 10)
    losses = {0: {1: [3, 2, 1, 2], 4: [3, 2, 1.5, 1]}, 1: {1: [2, 1, 3, 4], 4: [2, 1, 3, 4]},
              2: {1: [3, 2, 1, 2], 4: [3, 0.5, 1, 2]}}
    runs = [(seed, {"T": T, "eps": eps}, v) for seed, per_eps in losses.items() for eps, vs in per_eps.items()
            for T, v in zip((2, 5, 15, 50), vs, strict=True)]
    claim = FigureClaim("O", "the optimal T grows with eps", "optimum_increasing", "loss", x="T", by="eps")
    v = judge(claim, _values(runs))
    assert (v.holds, v.seeds_holding, v.seeds) == (False, 1, 3)
    assert v.effect == pytest.approx((35 + 0 - 10) / 3)
    assert v.values["0"] == {"best T at eps=1": 15.0, "best T at eps=4": 50.0}
    assert FAILS.match(v.line()), v.line()
    higher = judge(FigureClaim("O", "grows", "optimum_increasing", "acc", better="higher", x="T", by="eps"),
                   _values([(s, lab, -val) for s, lab, val in runs]))
    assert higher.values == v.values  # the argmax of -loss is the argmin of loss
    both = judge(claim, _values([r for r in runs if r[0] == 0] + [(1, *r[1:]) for r in runs if r[0] == 0]))
    assert (both.holds, both.seeds_holding) == (True, 2)
    assert HOLDS.match(both.line()), both.line()


def test_optimum_increasing_needs_x_and_by():
    with pytest.raises(ValueError, match="needs by"):
        FigureClaim("O", "grows", "optimum_increasing", "loss", x="T")
    with pytest.raises(ValueError, match="needs x"):
        FigureClaim("O", "grows", "optimum_increasing", "loss", by="eps")


def test_worsens_faster_compares_the_change_of_two_cases_along_x():
    # max test loss (lower is better) from T0 = 5 to 20: seed 0: fedamp +3, wpfl -1 (effect 4);
    # seed 1: fedamp +1, wpfl +2 (effect -1); seed 2: fedamp 0, wpfl -0.5 (effect 0.5)
    ends = {0: {"fedamp": (2, 5), "wpfl": (2, 1)}, 1: {"fedamp": (2, 3), "wpfl": (1, 3)},
            2: {"fedamp": (2, 2), "wpfl": (2, 1.5)}}
    runs = [(seed, {"rule": rule, "T0": T0}, v) for seed, per in ends.items() for rule, vs in per.items()
            for T0, v in zip((5, 20), vs, strict=True)]
    claim = FigureClaim("W", "FedAMP degrades faster", "worsens_faster", "loss", x="T0",
                        case={"rule": "fedamp"}, other={"rule": "wpfl"})
    v = judge(claim, _values(runs))
    assert (v.holds, v.seeds_holding, v.seeds) == (True, 2, 3)
    assert v.effect == pytest.approx((4 - 1 + 0.5) / 3)
    assert v.values["0"] == {"change of rule=fedamp over T0": 3.0, "change of rule=wpfl over T0": -1.0}
    assert HOLDS.match(v.line()), v.line()
    acc = judge(FigureClaim("W", "worse", "worsens_faster", "acc", better="higher", x="T0",
                            case={"rule": "fedamp"}, other={"rule": "wpfl"}),
                _values([(s, lab, -val) for s, lab, val in runs]))
    assert acc.effect == pytest.approx(v.effect)  # an accuracy falling is a loss rising


def test_worsens_faster_needs_case_and_other():
    with pytest.raises(ValueError, match="needs other"):
        FigureClaim("W", "w", "worsens_faster", "loss", x="T0", case={"rule": "a"})
    with pytest.raises(ValueError, match="needs case"):
        FigureClaim("W", "w", "worsens_faster", "loss", x="T0", other={"rule": "a"})
