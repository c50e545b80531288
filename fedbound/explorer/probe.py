"""Ask a running explorer (``fedbound serve``) what the page asks on one update, and check its answer.

``python -m fedbound.explorer.probe URL PAPER`` posts the paper's example setting to ``/api/plan`` and
``/api/curve`` (the first plot variable), prints the recommendation, the curves and the time taken (and of
a second update with eps moved), and
whether the plan is exactly what ``fedbound plan PAPER --set ... --json`` prints (exit status 1 if not).
``make demo`` uses it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from typing import Any


def post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.load(response)


def main(argv: list[str]) -> int:
    from fedbound import registry

    base, name = argv[0].rstrip("/") + "/", argv[1]
    paper = registry.get(name, "plan")
    setting = dict(paper.example)
    vs = next(iter(paper.load("plots"))) if paper.plots else None
    t0 = time.perf_counter()
    plan = post(f"{base}api/plan/{name}", setting)
    curve = post(f"{base}api/curve/{name}?vs={vs}", setting) if vs else None
    ms = 1e3 * (time.perf_counter() - t0)
    rec = plan["recommendation"]
    sigma = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in rec["sigma"].items())
    bound = "undefined" if rec["bound"] is None else f"{rec['bound']:.4g}"
    print(f"POST /api/plan/{name}: T = {rec['T']}, K = {rec['K']}, sigma {sigma}, bound {bound}")
    if curve:
        print(f"POST /api/curve/{name}?vs={vs}: {len(curve['curves'])} curves, "
              f"{len(curve['points'])} marked points ({curve['title']})")
    print(f"both answered in {ms:.0f} ms (the server's first request of this paper includes its imports)")
    if "eps" in setting:
        moved = {**setting, "eps": setting["eps"] * 1.5}
        t0 = time.perf_counter()
        post(f"{base}api/plan/{name}", moved)
        if vs:
            post(f"{base}api/curve/{name}?vs={vs}", moved)
        took = 1e3 * (time.perf_counter() - t0)
        print(f"the next update (eps = {moved['eps']:g}): {took:.0f} ms, plan then curve one after the other")
    sets = [a for k, v in setting.items() for a in ("--set", f"{k}={v}")]
    cli = subprocess.run([sys.executable, "-m", "fedbound", "plan", name, *sets, "--json"],
                         capture_output=True, check=True, text=True)
    same = json.loads(cli.stdout) == plan
    print(f"the plan is exactly the JSON of fedbound plan {name} --json: {same}")
    return 0 if same else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
