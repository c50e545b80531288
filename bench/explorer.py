"""How fast the design explorer answers (issue: < 200 ms per live update for NbAFL on 2 cores; 200 concurrent
requests complete without error).

A live ``fedbound serve`` (pinned to 2 CPU cores where the machine has them) is measured in one run against
baselines measured in the same run, A and B interleaved:

* one update = what the page sends when the eps slider moves: ``POST /api/plan/nbafl`` and
  ``POST /api/curve/nbafl?vs=T`` at once, for a new eps each time (no cache helps); its baseline is the same
  work in this process without HTTP (the CLI's ``build_plan`` and ``figure_data``);
* 200 concurrent plan requests (200 client threads released together) against the same 200 sent one after
  the other.
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

PAPER = "nbafl"
UPDATES = 30
CONCURRENT = 200


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


def main() -> None:
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
        "concurrent_vs_sequential": conc_time / seq_time, "errors": errors,
    })
    if errors:
        raise SystemExit(f"{errors} requests failed")


if __name__ == "__main__":
    main()
