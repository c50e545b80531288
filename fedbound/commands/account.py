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
        json: JsonFlag = False,
    ) -> None:
        """Noise each accounting method needs for (eps, delta) over the rounds, and the saving over
        classic."""
        from fedbound.accounting import compare_noise
        from fedbound.checks import check_finite, check_real
        from fedbound.output import print_json

        s = float(check_real("--sensitivity", sensitivity, 0.0, low_open=True))
        rows = compare_noise(eps, delta, q, steps, pld=pld, without_replacement=wor)
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


def _row_dict(row) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(row)
