"""What a dead model endpoint costs a recall: the `llm` reconstructor at a closed port on
127.0.0.1 against `rules`, five recalls in a row over the same 10 lessons (hash embedder).

    python benchmarks/dead_endpoint.py

Prints each recall's seconds, how many items were served and the briefing's warnings.
"""

from __future__ import annotations

import socket
import tempfile
import time
import warnings
from pathlib import Path

from situated import Memory, Principal, State

ME = Principal("acme", {"support"}, "internal")
NOW = State("Annual customer wants a refund 45 days after buying",
            facts={"plan": "annual", "days": 45})


def fill(mem: Memory) -> Memory:
    for n in range(10):
        mem.add(f"Annual plans past {n + 20} days get a prorated refund, variant {n}.",
                principal=ME, namespace="refunds", conditions=["plan == 'annual'"],
                state=State("Annual subscriber asks for a refund",
                            facts={"plan": "annual", "days": 60}))
    return mem


def main() -> None:
    warnings.simplefilter("ignore")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, then released: nothing listens there
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        rules = fill(Memory(Path(tmp) / "rules.db", embedder="hash"))
        dead = fill(Memory(Path(tmp) / "dead.db", embedder="hash", reconstructor="llm",
                           reconstructor_options={"base_url": f"http://127.0.0.1:{port}",
                                                  "model": "m"}))
        for name, mem in (("rules", rules), ("llm at a closed port", dead)):
            times = []
            for _ in range(5):
                t = time.perf_counter()
                b = mem.recall(NOW, principal=ME, namespace="refunds")
                times.append(time.perf_counter() - t)
            print(f"{name}: recalls 1-5 {', '.join(f'{x:.2f}' for x in times)} s; served "
                  f"{len(b.items)}; warnings {len(getattr(b, 'warnings', ()))}")
            mem.close()


if __name__ == "__main__":
    main()
