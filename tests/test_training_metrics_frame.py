"""The tidy metrics table: built column by column, it equals pandas' own coercion of the rows (the
reference below: DataFrame of the dicts, astype per column), for every kind of value a row may hold."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fedbound.tests._training_reference import tiny_setup
from fedbound.training.engine import RunOptions, run
from fedbound.training.local import LocalSGD
from fedbound.training.metrics import FIRST_COLUMNS, to_frame
from fedbound.training.nbafl import NbAFL


def _reference(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    for col in FIRST_COLUMNS:
        if col not in frame.columns:
            frame[col] = None
    frame = frame[FIRST_COLUMNS + [c for c in frame.columns if c not in FIRST_COLUMNS]]
    for col in ("round", "client", "participants"):
        frame[col] = frame[col].astype("Int64")
    frame["participated"] = frame["participated"].astype("boolean")
    for col in frame.columns:
        if col not in ("round", "client", "participants", "participated"):
            frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("Float64")
    return frame


def test_the_table_equals_pandas_coercion_of_the_rows():
    _, _, data, model = tiny_setup()
    result = run(NbAFL(3, 3.0, LocalSGD(steps=2, lr=0.2)), model, data, options=RunOptions(eval_clients=True))
    odd = [{"round": 4, "client": None, "loss": float("inf"), "note": "text", "flag": True,
            "participated": None, "half": np.float32(2.5), "count": np.int64(3)},
           {"round": 5, "client": 2, "loss": None, "note": 1.5, "participated": False, "nan": float("nan")}]
    rows = result.state.rows + odd
    got = to_frame(rows)
    pd.testing.assert_frame_equal(got, _reference(rows))
    assert got["note"].isna().tolist()[-2:] == [True, False]  # text is NA, a number stays
    pd.testing.assert_frame_equal(to_frame([]), _reference([]), check_index_type=False)
