"""Fairness under one adversarial writer: other tenants' recall latency, idle and under attack.

Run from the repository root:

    python benchmarks/fairness.py --quick          # 10 s per phase
    python benchmarks/fairness.py                  # 30 s per phase, one worker
    python benchmarks/fairness.py --workers 2 --json out.json

A `situated serve` (a real subprocess on 127.0.0.1) holds three reader tenants of `--memories`
memories each. Three reader threads, one per tenant, each with its own key and keep-alive
client, recall in a loop: first alone (idle), then while one adversarial writer of a fourth
tenant adds, back to back, notes at the content limit built from the shapes that made the
screens backtrack (`tests/linear_screens.py`: a name run before `(`, a keyword and spaces,
e-mail-like runs, ...). Reported per phase: recalls, p50 and p95 latency, and the ratio of the
p95 under attack to the idle one (the issue's target: within 2x), with the writer's adds.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

LIMIT = 8000
SHAPES = [("(", ".a_"), ("password", " "), ("ibm_cloud_iam_key", " "), ("", "ab-"),
          ("", "a@a."), ("", "a.b_"), ("", "sk-"), ("", "1.1."), ("", "a("), ("", "//"),
          ("account 1", " 1"), ("", "eyJa")]
"""(prefix, unit) repeated to the content limit: the known backtracking shapes."""
TOPICS = ["refund", "shipping", "login", "billing", "warranty", "upgrade"]


def adversarial(prefix: str, unit: str) -> str:
    text = prefix + unit * ((LIMIT - len(prefix)) // len(unit) + 1)
    return text[:LIMIT]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli(db: Path, embedder: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "situated", "--db", str(db), "--embedder",
                          embedder, *args], capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise RuntimeError(out.stderr)
    return out.stdout


def new_key(db: Path, embedder: str, tenant: str) -> str:
    out = cli(db, embedder, "keys", "create", "--tenant", tenant, "--json")
    return str(json.loads(out.splitlines()[-1])["secret"])


def start(db: Path, embedder: str, workers: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "situated", "--db", str(db), "--embedder", embedder, "serve",
         "--port", str(port), "--workers", str(workers)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/openapi.json", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("situated serve did not start")


def seed(url: str, secret: str, n: int, tenant: int) -> None:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"},
                      timeout=300) as c:
        for start_at in range(0, n, 100):
            items = []
            for i in range(start_at, min(n, start_at + 100)):
                topic = TOPICS[i % len(TOPICS)]
                items.append({
                    "content": f"For a {topic} case {i}, check the plan before acting "
                               f"(tenant {tenant}).",
                    "kind": "lesson", "namespace": topic,
                    "state": {"text": f"customer asks about {topic}, case {i}",
                              "facts": {"plan": "annual" if i % 2 else "monthly", "n": i}},
                    "conditions": ["plan == 'annual'"] if i % 3 == 0 else [],
                })
            r = c.post("/v1/memories/batch", json={"items": items})
            r.raise_for_status()


def loop(url: str, secret: str, until: float, send: Callable[[httpx.Client, int], Any],
         timeout: float) -> list[float]:
    took = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"},
                      timeout=timeout) as c:
        i = 0
        while time.monotonic() < until:
            start = time.monotonic()
            try:
                send(c, i).raise_for_status()
            except httpx.HTTPError:
                took.append(float("inf"))  # an error or a timeout counts as never served
            else:
                took.append(time.monotonic() - start)
            i += 1
    return took


def recall(c: httpx.Client, i: int) -> httpx.Response:
    topic = TOPICS[i % len(TOPICS)]
    return c.post("/v1/recall", json={
        "state": {"text": f"a customer asks about {topic} after {i % 40} days",
                  "facts": {"plan": "annual" if i % 2 else "monthly"}},
        "intent": f"resolve the {topic} request", "k": 5})


def attack(c: httpx.Client, i: int) -> httpx.Response:
    prefix, unit = SHAPES[i % len(SHAPES)]
    return c.post("/v1/memories", json={"content": adversarial(prefix, unit), "kind": "note",
                                        "state": {"text": adversarial(prefix, unit)}})


def pct(xs: Sequence[float], q: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q * len(ys)))] * 1000 if ys else float("nan")


def phase(url: str, readers: Sequence[str], writer: str | None, seconds: float,
          timeout: float) -> dict[str, Any]:
    until = time.monotonic() + seconds
    results: list[list[float]] = [[] for _ in readers]
    writes: list[float] = []

    def read(k: int) -> None:
        results[k] = loop(url, readers[k], until, recall, timeout)

    threads = [threading.Thread(target=read, args=(k,)) for k in range(len(readers))]
    if writer is not None:
        def write() -> None:
            writes.extend(loop(url, writer, until, attack, timeout))
        threads.append(threading.Thread(target=write))
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + timeout + 60)
    lat = [x for r in results for x in r]
    return {"recalls": len(lat), "p50_ms": round(pct(lat, 0.5), 1),
            "p95_ms": round(pct(lat, 0.95), 1), "max_ms": round(max(lat) * 1000, 1),
            "errors": sum(1 for x in lat if x == float("inf")),
            "adds": len(writes), "add_p50_ms": round(pct(writes, 0.5), 1) if writes else None,
            "add_max_ms": round(max(writes) * 1000, 1) if writes else None}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10 s per phase")
    ap.add_argument("--seconds", type=float, default=30.0, help="length of each phase")
    ap.add_argument("--memories", type=int, default=300, help="memories per reader tenant")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--embedder", default="minilm-static")
    ap.add_argument("--timeout", type=float, default=60.0, help="client timeout, s")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    seconds = 10.0 if args.quick else args.seconds
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "fair.db"
        cli(db, args.embedder, "keys", "list")
        readers = [new_key(db, args.embedder, f"reader{k}") for k in range(3)]
        writer = new_key(db, args.embedder, "attacker")
        proc, url = start(db, args.embedder, args.workers)
        try:
            for k, secret in enumerate(readers):
                seed(url, secret, args.memories, k)
            phase(url, readers, None, 3, args.timeout)  # warm up every worker's caches
            idle = phase(url, readers, None, seconds, args.timeout)
            busy = phase(url, readers, writer, seconds, args.timeout)
        finally:
            proc.kill()
            proc.wait(30)
    ratio = busy["p95_ms"] / idle["p95_ms"] if idle["p95_ms"] else float("nan")
    report = {"workers": args.workers, "embedder": args.embedder, "seconds": seconds,
              "memories_per_tenant": args.memories, "idle": idle, "adversarial": busy,
              "p95_ratio": round(ratio, 2)}
    print(f"fairness: {args.workers} worker(s), {args.embedder}, {seconds:g} s per phase, "
          f"3 reader tenants x {args.memories} memories")
    print(f"{'phase':<12} {'recalls':>8} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>9} "
          f"{'errors':>6} {'adds':>5} {'add p50':>8} {'add max':>8}")
    for name, row in (("idle", idle), ("adversarial", busy)):
        print(f"{name:<12} {row['recalls']:>8} {row['p50_ms']:>8} {row['p95_ms']:>8} "
              f"{row['max_ms']:>9} {row['errors']:>6} {row['adds']:>5} "
              f"{row['add_p50_ms'] or '-':>8} {row['add_max_ms'] or '-':>8}")
    print(f"foreign-tenant recall p95 under one adversarial writer / idle: {ratio:.2f}x "
          f"(target: within 2x)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
