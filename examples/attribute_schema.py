"""The attribute schema, learned: preferences keep every value until the evidence says an
attribute holds one, then the older values are superseded retroactively.

    python examples/attribute_schema.py [DB]

No model and no network: the hash embedder, the rules reconstructor, a fresh store (a
temporary file unless DB is given). Prints what happens at each step and exits non-zero if
the store does not behave as described.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from situated import Memory, Principal, State

AGENT = Principal("travel-co", {"support"}, "internal", "booking-agent")


def seat(mem: Memory, who: str, value: str) -> str:
    return mem.add(f"{who.title()} prefers the {value} seat.", principal=AGENT,
                   kind="preference", namespace="travel", entity=who, attribute="seat",
                   value=value).id


def state(mem: Memory, mid: str) -> str:
    return mem.inspect(mid, principal=AGENT).state.value


def booked_with(mem: Memory, mid: str, success: bool) -> None:
    """An agent recalls, books the seat memory `mid` says, and reports the outcome."""
    text = mem.inspect(mid, principal=AGENT).content
    b = mem.recall(State(text), principal=AGENT, namespace="travel", k=10)
    if mid not in {i.memory_id for i in b.items}:
        raise SystemExit(f"recall did not serve {mid}")
    mem.feedback(b.recall_id, principal=AGENT, success=success, used=[mid])


def schema_line(mem: Memory) -> str:
    entries = mem.attribute_schema(principal=AGENT)
    return "; ".join(f"{e.attribute}: {e.decision} (evidence {e.single_evidence} for, "
                     f"{e.multi_evidence} against, P(single) = {e.p_single:.3f})"
                     for e in entries) or "nothing learned yet"


def main(path: Path) -> None:
    with Memory(path, embedder="hash") as mem:
        print("1. Two seat preferences per traveller: preferences never supersede by default.")
        dana_aisle, dana_window = seat(mem, "dana", "aisle"), seat(mem, "dana", "window")
        erin_front, erin_back = seat(mem, "erin", "front"), seat(mem, "erin", "back")
        print(f"   dana aisle {state(mem, dana_aisle)}, dana window {state(mem, dana_window)}; "
              f"erin front {state(mem, erin_front)}, erin back {state(mem, erin_back)}")
        likes = [mem.add(f"Dana likes {x}.", principal=AGENT, kind="preference",
                         namespace="travel", entity="dana", attribute="likes", value=x).id
                 for x in ("tea", "jazz")]
        booked_with(mem, likes[0], success=True)  # the older 'likes' still right: counter
        print("2. Bookings with Dana's older seat fail three times (a newer value existed):")
        for n in range(3):
            booked_with(mem, dana_aisle, success=False)
            print(f"   failure {n + 1}: {schema_line(mem)}")
        print("3. The seat attribute is now single-valued; the conflicts were superseded "
              "retroactively, including Erin's, which no outcome touched:")
        for name, mid in (("dana aisle", dana_aisle), ("dana window", dana_window),
                          ("erin front", erin_front), ("erin back", erin_back)):
            print(f"   {name}: {state(mem, mid)}")
        print("4. 'likes' keeps both values (a success credited the older one):",
              ", ".join(state(mem, m) for m in likes))
        events = [e for e in mem.history(dana_aisle, principal=AGENT)
                  if e.event.value == "schema"]
        print(f"5. Every schema decision is a ledger event: {len(events)} on {dana_aisle}, "
              f"the last: {events[-1].reason!r}")
        ok = (state(mem, dana_aisle) == state(mem, erin_front) == "INVALIDATED"
              and state(mem, dana_window) == state(mem, erin_back) == "ACTIVE"
              and all(state(mem, m) == "ACTIVE" for m in likes))
        if not ok:
            raise SystemExit("the schema did not behave as described")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / "schema.db")
