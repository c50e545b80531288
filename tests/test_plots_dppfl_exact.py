"""Issue 23: at q < 1 DP-PFL's bound-vs-T figure draws the noise the plan deploys -- its exact (PLD) sigma at
the T it calibrated, the recommended point on that line -- and the RDP sigma*(T) curve only as a dashed upper
bound, never as "the deployed noise"."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fedbound.scheduling import dppfl as sched
from tests.test_figure_labels import _setting

pytest.importorskip("matplotlib")


def test_deployed_line_is_the_exact_sigma_and_lies_below_the_rdp_curve():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant

    from fedbound.validation.reproduce.plots_dppfl import draw_T

    s = _setting("dppfl", "dppfl_mnist.toml")
    assert float(s["q_in"]) < 1.0
    fig, ax = plt.subplots()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        draw_T(ax, s)
        rec = sched.plan(s).recommendation
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    exact = next(ln for lab, ln in lines.items() if lab.startswith("deployed noise (exact, PLD)"))
    dashed = next(ln for lab, ln in lines.items() if lab.startswith("at the RDP sigma*(T)"))
    assert not any(lab.startswith("deployed noise (tight)") for lab in lines)
    Te, ye = (np.asarray(v, dtype=float) for v in exact.get_data())
    Td, yd = (np.asarray(v, dtype=float) for v in dashed.get_data())
    i = int(np.flatnonzero(Te == rec.T)[0])
    assert ye[i] == pytest.approx(rec.bound, rel=1e-12)  # the recommendation sits on the deployed line
    assert ye[i] < yd[int(np.flatnonzero(Td == rec.T)[0])]  # exact noise is below the RDP curve there
    # the deployed sigma at rec.T meets (eps, delta) by dp-accounting's own PLD, independently of fedbound
    tau0 = int(s.get("tau0", 1))
    z = rec.sigma["inner"] / rec.extra["C"]
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    event = dp_event.PoissonSampledDpEvent(float(s["q_in"]), dp_event.GaussianDpEvent(z))
    acc.compose(event, 2 * rec.T * tau0)
    assert 0.98 * s["eps"] <= acc.get_epsilon(s["delta"]) <= s["eps"] * (1 + 1e-3)
    plt.close(fig)
