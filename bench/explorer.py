"""How fast the design explorer answers (issue: < 200 ms per live update for NbAFL on 2 cores; 200 concurrent
requests complete without error; issue 25: every route of every paper < 0.3 CPU s warm).

A live ``fedbound serve`` (pinned to 2 CPU cores where the machine has them) is measured in one run against
baselines measured in the same run, A and B interleaved:

* one update = what the page sends when the eps slider moves: ``POST /api/plan/nbafl`` and
  ``POST /api/curve/nbafl?vs=T`` at once, for a new eps each time (no cache helps); its baseline is the same
  work in this process without HTTP (the CLI's ``build_plan`` and ``figure_data``);
* 200 concurrent plan requests (200 client threads released together) against the same 200 sent one after
  the other;
* ``routes``: every route of every paper (NbAFL with K open and K set, UDP, PADPFL, WPFL, DP-PFL) through
  the app's test client in a fresh process with its own cache directory, in CPU seconds, each request with a
  new eps (no answer is reused), interleaved with ``python -c 'import numpy'`` (A B A B ...): ``plan``,
  ``curve_VS`` for each plot variable, ``claims`` (the kept answer: the first check of a paper's claims
  happens once per code version) and ``update`` (what the page sends on a change: plan + the first plot,
  one body).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from _harness import write_result

HEADLINE = ("The explorer's live update ({explorer[paper]}, over HTTP): median "
            "{explorer[update][median_ms]:.0f} ms, {explorer[update_ratio_http_vs_in_process]:.2f}x the "
            "in-process plan; "
            "{explorer[routes][summary]}.")
PAPER = "nbafl"
UPDATES = 30
CONCURRENT = 200
ROUTE_REPS = 5
ROUTE_TARGET_S = 0.3
ROUTE_CASES = (("nbafl", {}), ("nbafl[K=20]", {"K": 20}), ("udp", {}), ("adaptive", {}), ("wpfl", {}),
               ("dppfl", {}))
NOT_TARGETED: tuple[str, ...] = ()
"""Papers measured but not held to the target (none: DP-PFL's routes meet it since its exact plan)."""

ROUTES = """
import json, subprocess, sys, time, warnings
warnings.simplefilter("ignore")
from fastapi.testclient import TestClient
from fedbound import registry
from fedbound.explorer import api
from fedbound.explorer.app import create_app
cases, reps = json.loads(sys.argv[1]), int(sys.argv[2])

def cpu(fn):
    c = time.process_time(); r = fn(); spent = time.process_time() - c
    assert r.status_code == 200, r.text
    return spent

def floor():
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "import numpy"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

out = {"numpy_import_cpu_s": [], "cases": {}}
with TestClient(create_app()) as client:
    def routes(label, name, extra, factor):
        body = {**registry.get(name).example, **extra}
        body["eps"] = float(body["eps"]) * factor
        plots = list(registry.get(name).load("plots")) if registry.get(name).plots else []
        got = {}
        got["plan"] = cpu(lambda: client.post(f"/api/plan/{name}", json=body))
        for i, vs in enumerate(plots):  # each curve at its own new eps: nothing shared with the plan
            b = {**body, "eps": body["eps"] * (1 + 1e-3 * (i + 1))}
            got[f"curve_{vs}"] = cpu(lambda: client.post(f"/api/curve/{name}?vs={vs}", json=b))
        api.claims_json.cache_clear()
        got["claims"] = cpu(lambda: client.get(f"/api/claims/{name}"))
        b = {**body, "eps": body["eps"] * 1.0071}
        got["update"] = cpu(lambda: client.post(f"/api/plan/{name}", json=b))
        if plots:
            got["update"] += cpu(lambda: client.post(f"/api/curve/{name}?vs={plots[0]}", json=b))
        return got
    for label, name, extra in cases:  # warm-up: imports, compiled formulas, the claims' kept answers
        routes(label, name, extra, 1.0)
    for k in range(reps):  # A B A B ...: the floor, then every case's routes
        out["numpy_import_cpu_s"].append(floor())
        for label, name, extra in cases:
            for route, t in routes(label, name, extra, 1.013 + 0.021 * k).items():
                out["cases"].setdefault(label, {}).setdefault(route, []).append(t)
print(json.dumps(out))
"""


def _pin_two_cores() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, cpus[:2])


def _start_server() -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "fedbound", "serve", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            preexec_fn=_pin_two_cores)
    for line in proc.stdout:  # a warning may come before the line that says where it listens
        if "fedbound explorer on " in line:
            break
    else:
        proc.kill()
        raise SystemExit("fedbound serve did not start")
    return proc, line.split(" on ", 1)[1].split()[0]


def _post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _update_http(base: str, body: dict, pool: ThreadPoolExecutor) -> float:
    t0 = time.perf_counter()
    futures = [pool.submit(_post, f"{base}api/plan/{PAPER}", body),
               pool.submit(_post, f"{base}api/curve/{PAPER}?vs=T", body)]
    codes = [f.result()[0] for f in futures]
    elapsed = time.perf_counter() - t0
    if codes != [200, 200]:
        raise SystemExit(f"update failed: {codes}")
    return elapsed


def _update_in_process(body: dict) -> float:
    from fedbound.explorer import api

    t0 = time.perf_counter()
    api.plan_json(PAPER, body)
    api.curve_json(PAPER, body, "T")
    return time.perf_counter() - t0


def _concurrent(base: str, bodies: list[dict]) -> tuple[float, list[int]]:
    gate = threading.Barrier(len(bodies) + 1)

    def one(body: dict) -> int:
        gate.wait()
        return _post(f"{base}api/plan/{PAPER}", body)[0]

    with ThreadPoolExecutor(len(bodies)) as pool:
        futures = [pool.submit(one, b) for b in bodies]
        gate.wait()
        t0 = time.perf_counter()
        codes = [f.result() for f in futures]
        return time.perf_counter() - t0, codes


def _sequential(base: str, bodies: list[dict]) -> tuple[float, list[int]]:
    t0 = time.perf_counter()
    codes = [_post(f"{base}api/plan/{PAPER}", b)[0] for b in bodies]
    return time.perf_counter() - t0, codes


def _summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"median_ms": 1e3 * statistics.median(ordered),
            "p95_ms": 1e3 * ordered[int(0.95 * (len(ordered) - 1))], "max_ms": 1e3 * ordered[-1]}


def _routes(reps: int = ROUTE_REPS) -> dict:
    """Every route of every paper, CPU seconds, interleaved with the numpy-import floor (module docstring)."""
    import tempfile

    cases = [(label, label.split("[")[0], extra) for label, extra in ROUTE_CASES]
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "FEDBOUND_CACHE_DIR": cache}
        out = subprocess.run([sys.executable, "-c", ROUTES, json.dumps(cases), str(reps)], env=env,
                             check=True, capture_output=True, text=True).stdout
    raw = json.loads(out.strip().splitlines()[-1])
    floor = statistics.median(raw["numpy_import_cpu_s"])
    result: dict = {"numpy_import_cpu_s": floor, "target_cpu_s": ROUTE_TARGET_S, "reps": reps,
                    "not_targeted": list(NOT_TARGETED), "cases": {}, "over_target": []}
    for label, routes in raw["cases"].items():
        result["cases"][label] = {r: {"median_cpu_s": statistics.median(v), "min_cpu_s": min(v),
                                      "over_numpy": statistics.median(v) / floor} for r, v in routes.items()}
        for r, v in result["cases"][label].items():
            print(f"{label:14s} {r:18s} median {v['median_cpu_s']:.3f} CPU s (min {v['min_cpu_s']:.3f}; "
                  f"{v['over_numpy']:.1f}x the numpy import)")
            if v["median_cpu_s"] >= ROUTE_TARGET_S and label.split("[")[0] not in NOT_TARGETED:
                result["over_target"].append(f"{label} {r}")
    worst = {label: max(routes.items(), key=lambda kv: kv[1]["median_cpu_s"])
             for label, routes in result["cases"].items()}
    result["summary"] = (
        f"every route of every paper through the app, a new eps each time, median CPU s (the numpy import: "
        f"{floor:.2f}): the slowest route per paper " + ", ".join(
            f"{label} {route} {v['median_cpu_s']:.2f}" for label, (route, v) in worst.items())
        + f"; at or over {ROUTE_TARGET_S} s: {', '.join(result['over_target']) or 'none'}")
    print(f"numpy import floor {floor:.3f} CPU s; routes at or over {ROUTE_TARGET_S} CPU s: "
          f"{', '.join(result['over_target']) or 'none'}")
    return result


def main() -> None:
    import tempfile

    routes = _routes()
    with tempfile.TemporaryDirectory() as cache:  # a fresh plan cache: no answer kept from an earlier run
        saved = os.environ.get("FEDBOUND_CACHE_DIR")
        os.environ["FEDBOUND_CACHE_DIR"] = cache  # for the server (it inherits it) and in-process
        try:
            return _live(routes)
        finally:
            if saved is None:
                os.environ.pop("FEDBOUND_CACHE_DIR", None)
            else:
                os.environ["FEDBOUND_CACHE_DIR"] = saved


def _live(routes: dict) -> None:
    from fedbound import registry

    example = dict(registry.get(PAPER).example)
    proc, base = _start_server()
    try:
        with ThreadPoolExecutor(2) as pool:
            _update_http(base, example, pool)  # first requests import and compile: not an update
            _update_in_process(example)
            http, local = [], []
            for i in range(UPDATES):  # eps along the page's log slider, interleaved A/B
                body = {**example, "eps": round(example["eps"] * 10 ** (-1 + 2 * i / (UPDATES - 1)), 4)}
                http.append(_update_http(base, body, pool))
                local.append(_update_in_process({**body, "eps": body["eps"] * 1.001}))
        bodies = [{**example, "eps": round(example["eps"] * (1 + i / CONCURRENT), 6)}
                  for i in range(CONCURRENT)]
        conc_time, conc_codes = _concurrent(base, bodies)
        seq_time, seq_codes = _sequential(base, [{**b, "eps": b["eps"] * 1.0001} for b in bodies])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    upd, base_upd = _summary(http), _summary(local)
    errors = sum(c != 200 for c in conc_codes) + sum(c != 200 for c in seq_codes)
    print(f"live update ({PAPER}, plan + curve over HTTP, {UPDATES} eps values, server on 2 cores): "
          f"median {upd['median_ms']:.0f} ms, p95 {upd['p95_ms']:.0f} ms, max {upd['max_ms']:.0f} ms "
          f"(target < 200 ms); in-process baseline median {base_upd['median_ms']:.0f} ms; "
          f"ratio {upd['median_ms'] / base_upd['median_ms']:.2f}")
    ok = sum(c == 200 for c in conc_codes)
    print(f"{CONCURRENT} concurrent plan requests: {conc_time:.2f} s, {ok} ok; "
          f"the same {CONCURRENT} one after the other: {seq_time:.2f} s; ratio {conc_time / seq_time:.2f}; "
          f"errors: {errors}")
    write_result("explorer", {
        "paper": PAPER, "update": upd, "update_in_process": base_upd,
        "update_ratio_http_vs_in_process": upd["median_ms"] / base_upd["median_ms"],
        "update_target_ms": 200, "update_meets_target": upd["median_ms"] < 200,
        "concurrent": {"requests": CONCURRENT, "seconds": conc_time, "ok": sum(c == 200 for c in conc_codes)},
        "sequential": {"requests": CONCURRENT, "seconds": seq_time, "ok": sum(c == 200 for c in seq_codes)},
        "concurrent_vs_sequential": conc_time / seq_time, "errors": errors, "routes": routes,
    })
    if errors:
        raise SystemExit(f"{errors} requests failed")


if __name__ == "__main__":
    main()
