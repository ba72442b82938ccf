"""Start-up cost of situated, for one or more virtual environments, measured interleaved.

    python benchmarks/startup.py VENV [VENV ...] [--runs 9]

For each environment: the cumulative import time of `situated` (`python -X importtime`), and
the wall time of `python -c "import situated"`, `situated --help` and a one-shot
`situated recall` (default embedder, a store of 3 notes). Runs of the environments alternate,
so a noisy machine slows them alike; medians are printed. Threads are pinned to one.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

NOTES = ["Annual plans past 30 days get a prorated refund.",
         "Monthly plans are refunded in full within 7 days.",
         "Reset the router before escalating a connectivity ticket."]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("venvs", nargs="+")
    parser.add_argument("--runs", type=int, default=9)
    opts = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SITUATED_", "OPENAI_"))}
    env |= {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "RAYON_NUM_THREADS": "1"}
    work = tempfile.mkdtemp()
    cases: dict[str, dict[str, list[float]]] = {}
    runners = {}
    for venv in opts.venvs:
        py, cli = f"{venv}/bin/python", f"{venv}/bin/situated"
        db = f"{work}/{len(runners)}.db"
        for text in NOTES:
            subprocess.run([cli, "--db", db, "add", text, "--tenant", "acme", "--kind", "note"],
                           env=env, cwd=work, check=True, capture_output=True)
        runners[venv] = {
            "import time of situated (-X importtime)": lambda py=py: _importtime(py, env, work),
            "python -c 'import situated'": lambda py=py: _wall([py, "-c", "import situated"],
                                                               env, work),
            "situated --help": lambda cli=cli: _wall([cli, "--help"], env, work),
            "situated recall (one-shot)": lambda cli=cli, db=db: _wall(
                [cli, "--db", db, "recall", "refund on an annual plan", "--tenant", "acme"],
                env, work),
        }
    for name in next(iter(runners.values())):
        for fns in runners.values():
            fns[name]()  # warm: byte-compile, page cache
        for _ in range(opts.runs):
            for venv, fns in runners.items():
                cases.setdefault(name, {}).setdefault(venv, []).append(fns[name]())
    for name, by_venv in cases.items():
        cells = ", ".join(f"{v}: {statistics.median(xs):.3f} s" for v, xs in by_venv.items())
        print(f"{name} (median of {opts.runs}): {cells}")


def _wall(cmd: list[str], env: dict[str, str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - started


def _importtime(py: str, env: dict[str, str], cwd: str) -> float:
    out = subprocess.run([py, "-X", "importtime", "-c", "import situated"], env=env, cwd=cwd,
                         capture_output=True, text=True, check=True)
    for line in out.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| situated$", line)
        if m:
            return int(m.group(1)) / 1e6
    raise RuntimeError("no import time line for situated")


if __name__ == "__main__":
    main()
