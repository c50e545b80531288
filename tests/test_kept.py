"""fedbound.kept.LastKept: the per-process memo the planners share."""

from fedbound.kept import LastKept


def test_a_kept_result_is_returned_and_the_least_recently_used_goes_first():
    kept, calls = LastKept(2), []

    def compute(k):
        calls.append(k)
        return [k]

    a = kept.get("a", lambda: compute("a"))
    assert kept.get("a", lambda: compute("a")) is a and calls == ["a"]
    kept.get("b", lambda: compute("b"))
    kept.get("a", lambda: compute("a"))  # a is now the most recent
    kept.get("c", lambda: compute("c"))  # b goes
    assert len(kept) == 2 and calls == ["a", "b", "c"]
    assert kept.get("a", lambda: compute("a")) is a
    kept.get("b", lambda: compute("b"))
    assert calls == ["a", "b", "c", "b"]
