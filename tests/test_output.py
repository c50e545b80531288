import json
import math
from dataclasses import dataclass

import numpy as np
import pytest

from fedbound.output import to_jsonable


@dataclass(frozen=True)
class R:
    x: float
    arr: np.ndarray


def test_numpy_and_dataclasses_become_json():
    out = to_jsonable({"r": R(1.5, np.array([1, 2])), "k": np.int64(3), "t": (1, 2)})
    assert json.loads(json.dumps(out)) == {"r": {"x": 1.5, "arr": [1, 2]}, "k": 3, "t": [1, 2]}


@pytest.mark.parametrize("bad", [math.nan, math.inf, np.float64("nan")])
def test_non_finite_values_are_refused_with_their_path(bad):
    with pytest.raises(ValueError, match=r"\$\.a\.b\[1\]"):
        to_jsonable({"a": {"b": [0.0, bad]}})
