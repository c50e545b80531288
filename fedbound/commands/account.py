"""``fedbound account`` (noise -> eps by every method) and ``fedbound calibrate`` (eps -> noise by every
method).

Both take plain options (no config file) and print one table: one row per accounting method, what it
certifies, whether that is proven for these inputs, and below the table what each method assumes and every
validity warning.  ``--json`` prints the same as one JSON object.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from fedbound.commands._common import JsonFlag

Q = Annotated[float, typer.Option("--q", "--sample-rate", help="Sampling rate per round, in (0, 1] (K/N).")]
Steps = Annotated[int, typer.Option("--steps", "-T", help="Number of rounds (compositions), >= 1.")]
Delta = Annotated[float, typer.Option("--delta", help="Target delta, in (0, 1).")]
Sensitivity = Annotated[float, typer.Option("--sensitivity", help="L2 sensitivity (sigma = z * it).")]
Pld = Annotated[bool, typer.Option("--pld/--no-pld", help="Include dp-accounting's PLD (exact, ~0.5-5 s).")]
Wor = Annotated[bool, typer.Option("--wor/--no-wor", help="Include K-of-N sampling w/o replacement (RDP).")]
Clip = Annotated[float | None, typer.Option(
    "--clip", help="Add WPFL's quantization-assisted Gaussian mechanism (Zhao et al. 2025, Theorem 1) for "
                   "models clipped to norm C, quantized with --bits bits.")]
Bits = Annotated[int, typer.Option("--bits", help="Quantization bits R of the quantization-assisted "
                                                  "Gaussian mechanism (with --clip), 1..64.")]

QUANTIZED_LABEL = "quantized Gaussian (WPFL, Zhao et al. 2025, Theorem 1)"
QUANTIZED_ASSUMES = ("R-bit quantization of a model clipped to C, sensitivity 2C, basic composition over the "
                     "rounds; its delta is per outcome, not a set-based (eps, delta) guarantee, so it is "
                     "NOT a proven (eps, delta)")


def _quantized_row(value_fn, clip: float, bits: int):
    """The WPFL row: computed by ``value_fn(C, R)``, or None with the reason as its note."""
    from fedbound.accounting.compare import MethodRow
    from fedbound.checks import check_int, check_real

    C = float(check_real("--clip", clip, 0.0, low_open=True))
    R = int(check_int("--bits", bits, 1, 64))
    try:
        value, note = float(value_fn(C, R)), ""
    except ValueError as exc:
        value, note = None, str(exc)
    return MethodRow("quantized_gaussian", QUANTIZED_LABEL, value, False, False, QUANTIZED_ASSUMES, None,
                     note or "Theorem 1's delta is a per-outcome delta")


def _fmt(value: float | None, digits: int = 5) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _print(title: str, header: list[str], rows: list[list[Any]], method_rows, caption: str) -> None:
    from fedbound.output import console, print_table, print_warnings

    print_table(title, header, rows, caption=caption)
    con = console()
    con.print("[bold]What each method assumes[/bold]", highlight=False)
    for r in method_rows:
        con.print(f"  {r.label}: {r.assumes}", markup=False, highlight=False)
    print_warnings([f"{r.label}: {r.note}" for r in method_rows if r.note and r.value is not None])


def _guarantee(row) -> str:
    if row.value is None:
        return "n/a"
    return "proven" if row.valid else "NOT proven"


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("account")
    def account(
        q: Q,
        steps: Steps,
        delta: Delta,
        sigma: Annotated[float | None, typer.Option("--sigma", help="Noise std per coordinate.")] = None,
        noise_multiplier: Annotated[float | None, typer.Option(
            "--noise-multiplier", "-z", help="Noise std / sensitivity (instead of --sigma).")] = None,
        sensitivity: Sensitivity = 1.0,
        pld: Pld = True,
        wor: Wor = True,
        clip: Clip = None,
        bits: Bits = 16,
        json: JsonFlag = False,
    ) -> None:
        """eps certified by every accounting method for a given noise (classic, moments, RDP, PLD, ...)."""
        from fedbound.accounting import compare_epsilon
        from fedbound.checks import check_finite, check_real
        from fedbound.errors import ParameterError
        from fedbound.output import print_json

        if (sigma is None) == (noise_multiplier is None):
            raise ParameterError("--sigma", sigma, "exactly one of --sigma and --noise-multiplier")
        s = float(check_real("--sensitivity", sensitivity, 0.0, low_open=True))
        if noise_multiplier is not None:
            z = float(check_real("--noise-multiplier", noise_multiplier, 0.0, low_open=True))
        else:
            z = float(check_real("--sigma", sigma, 0.0, low_open=True)) / s
            check_finite("noise multiplier sigma/sensitivity", z, {"--sigma": sigma, "--sensitivity": s},
                         positive=True)
        rows = compare_epsilon(z, q, steps, delta, pld=pld, without_replacement=wor)
        if clip is not None:
            from fedbound.accounting import qa_gaussian_epsilon

            rows = (*rows, _quantized_row(
                lambda C, R: qa_gaussian_epsilon(delta, C, z * s, R, q, steps), clip, bits))
        inputs = {"noise_multiplier": z, "sigma": z * s, "sensitivity": s, "q": q, "steps": steps,
                  "delta": delta}
        if json:
            print_json({"command": "account", "inputs": inputs, "rows": list(rows)})
            return
        table = [[r.label, _fmt(r.value), _guarantee(r)] for r in rows]
        _print(f"eps after {steps} rounds: z = {z:.5g} (sigma = {z * s:.5g}), q = {q:g}, delta = {delta:g}",
               ["method", "eps", "guarantee"], table, rows,
               "eps: total privacy loss at delta; NOT proven = formula used outside its proof (see warnings)")

    @app.command("calibrate")
    def calibrate(
        eps: Annotated[float, typer.Option("--eps", help="Target eps over all rounds, > 0.")],
        q: Q,
        steps: Steps,
        delta: Delta,
        sensitivity: Sensitivity = 1.0,
        pld: Pld = True,
        wor: Wor = True,
        clip: Clip = None,
        bits: Bits = 16,
        mechanism: Annotated[str, typer.Option(
            "--mechanism", help="gaussian (one sampled Gaussian per step) or dppfl (DP-PFL, Wei et al. "
                                "2023, Theorem 1: two DP-SGD stages per local step; --steps is T)")
        ] = "gaussian",
        tau0: Annotated[int, typer.Option("--tau0", help="dppfl: local meta-steps per round")] = 1,
        q_out: Annotated[float | None, typer.Option("--q-out", help="dppfl: sample rate of the outer stage "
                                                                    "(default --q)")] = None,
        json: JsonFlag = False,
    ) -> None:
        """Noise each accounting method needs for (eps, delta) over the rounds; the saving over classic."""
        from fedbound.accounting import compare_noise
        from fedbound.checks import check_finite, check_real
        from fedbound.output import print_json

        s = float(check_real("--sensitivity", sensitivity, 0.0, low_open=True))
        if mechanism not in ("gaussian", "dppfl"):
            from fedbound.errors import ParameterError

            raise ParameterError("--mechanism", mechanism, "gaussian or dppfl")
        if mechanism == "dppfl":
            _calibrate_dppfl(eps, delta, q, q if q_out is None else q_out, steps, tau0, s, json)
            return
        _check_sigma_finite(compare_noise(eps, delta, q, steps, pld=False, without_replacement=False), s)
        rows = compare_noise(eps, delta, q, steps, pld=pld, without_replacement=wor)
        if clip is not None:
            from fedbound.accounting import calibrate_sigma_dp

            rows = (*rows, _quantized_row(
                lambda C, R: calibrate_sigma_dp(eps, delta, C, R, q, steps) / s, clip, bits))
        inputs = {"eps": eps, "delta": delta, "q": q, "steps": steps, "sensitivity": s}
        for r in rows:
            if r.value is not None:
                check_finite("sigma", r.value * s, {"--sensitivity": s, "--eps": eps})
        if json:
            out = [{**_row_dict(r), "sigma": None if r.value is None else r.value * s} for r in rows]
            print_json({"command": "calibrate", "inputs": inputs, "rows": out})
            return
        table = [[r.label, _fmt(r.value), _fmt(None if r.value is None else r.value * s),
                  "-" if r.saving_percent is None else f"{r.saving_percent:+.1f} %", _guarantee(r)]
                 for r in rows]
        _print(f"Noise for (eps = {eps:g}, delta = {delta:g}) over {steps} rounds at q = {q:g}",
               ["method", "z", "sigma", "saving", "guarantee"], table, rows,
               "z = sigma / sensitivity; saving = 1 - sigma/sigma_classic (classic = first row); "
               "NOT proven = formula used outside its proof (see warnings)")


def _check_sigma_finite(rows, s: float) -> None:
    """Before the costly rows (PLD, without replacement): the noise z * sensitivity of the cheap rows must be
    a finite float, else one line naming --sensitivity and the range that works for these targets."""
    import math

    from fedbound.errors import ParameterError

    z = max((r.value for r in rows if r.value is not None), default=None)
    if z is not None and not math.isfinite(z * s):
        raise ParameterError("--sensitivity", s, f"(0, {1e307 / z:.3g}] for these targets",
                             f"sigma = z * sensitivity must be finite and the largest noise multiplier here "
                             f"is z = {z:.4g}")


def _calibrate_dppfl(eps: float, delta: float, q_in: float, q_out: float, T: int, tau0: int, s: float,
                     json: bool) -> None:
    """DP-PFL's Theorem 1 (Wei et al. 2023, eq. (12)): the planner's sigma* on the paper's order grid, on a
    finer one, and what a one-mechanism calibrator over 2 T tau0 steps gives on fedbound's default grid."""
    from fedbound.bounds.dppfl import theorem1_calibration
    from fedbound.checks import check_int, check_probability, check_real
    from fedbound.output import print_json, print_table

    cal = theorem1_calibration(float(check_real("--eps", eps, 1e-6, 1e6)),
                               float(check_real("--delta", delta, 1e-100, 1.0, high_open=True)),
                               int(check_int("--steps", T, 1)),
                               int(check_int("--tau0", tau0, 1, 100_000)),
                               float(check_probability("--q", q_in, allow_one=True)),
                               float(check_probability("--q-out", q_out, allow_one=True)))
    if json:
        print_json({"command": "calibrate", "mechanism": "dppfl", "sensitivity": s, **cal})
        return
    rows = [["Theorem 1 on the paper's orders (Opacus' 151)", cal["sigma"], cal["sigma"] * s],
            ["Theorem 1 on a finer order grid", cal["sigma_tight"], cal["sigma_tight"] * s]]
    if cal["sigma_default_orders"] is not None:
        rows.append([f"one sampled Gaussian, {cal['steps_equivalent']} steps, fedbound's default orders",
                     cal["sigma_default_orders"], cal["sigma_default_orders"] * s])
    print_table(f"DP-PFL noise for (eps = {eps:g}, delta = {delta:g}), T = {T}, tau0 = {tau0}",
                ["accounting", "z", "sigma"], rows,
                caption=f"alpha* = {cal['alpha']:g}, inner share of the RDP {cal['inner_share']:.3f}; "
                        "the rows differ only by the Renyi orders minimised over (the default grid has no "
                        "order near alpha*)")


def _row_dict(row) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(row)
