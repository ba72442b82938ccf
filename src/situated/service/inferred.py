"""Sessions: the outcomes a client that never calls `feedback` implies (`learning.inferred`).

A session is named by the door (the MCP session, or `X-Situated-Session` over HTTP) and
belongs to one principal. Per namespace it remembers the last recall and the facts it served
(entity, attribute, value). A `remember` of a fact with the same entity and attribute and
another value blames the served one (inferred failure); a new recall in the same namespace,
with no correction since the last one, is a weak success crediting no memory. Held in this
process only (bounded, oldest sessions dropped): with several server processes, a session's
requests must reach the same one for outcomes to be inferred.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from situated.errors import NotFound
from situated.memory import Memory
from situated.models import FactValue, Kind, MemoryRecord, Principal
from situated.recall.briefing import Briefing

MAX_SESSIONS = 10_000


@dataclass
class _Served:
    recall_id: str
    facts: dict[tuple[str, str], tuple[str, FactValue]] = field(default_factory=dict)
    settled: bool = False
    """Explicit feedback was given, or an outcome was inferred: nothing more to infer."""


class Sessions:
    """The open recalls of each (principal, session, namespace)."""

    def __init__(self, enabled: bool = True, max_sessions: int = MAX_SESSIONS) -> None:
        self.enabled = enabled
        self._max = max_sessions
        self._open: OrderedDict[tuple[Principal, str, str], _Served] = OrderedDict()
        self._lock = threading.Lock()

    def after_recall(self, mem: Memory, who: Principal, session: str | None,
                     briefing: Briefing) -> None:
        if not self.enabled or not session:
            return
        key = (who, session, briefing.namespace or "*")
        with self._lock:
            prev = self._open.pop(key, None)
        if prev is not None and not prev.settled:
            mem.infer_feedback(prev.recall_id, principal=who, success=True)
        served = _Served(briefing.recall_id)
        for item in briefing.items:
            if item.kind != Kind.FACT.value:
                continue
            try:
                rec = mem.inspect(item.memory_id, principal=who)
            except NotFound:  # erased since
                continue
            if rec.entity is not None and rec.attribute is not None and not rec.multi_valued:
                served.facts[(rec.entity, rec.attribute)] = (rec.id, rec.value)
        with self._lock:
            self._open[key] = served
            while len(self._open) > self._max:
                self._open.popitem(last=False)

    def after_add(self, mem: Memory, who: Principal, session: str | None,
                  rec: MemoryRecord) -> None:
        if not self.enabled or not session or rec.entity is None or rec.attribute is None:
            return
        with self._lock:
            open_ = [s for (p, sid, _), s in self._open.items()
                     if p == who and sid == session and not s.settled]
        for served in open_:
            hit = served.facts.get((rec.entity, rec.attribute))
            if hit is None or hit[0] == rec.id or hit[1] == rec.value:
                continue
            served.settled = True
            mem.infer_feedback(served.recall_id, principal=who, success=False, blamed=hit[0])

    def after_feedback(self, who: Principal, recall_id: str) -> None:
        with self._lock:
            for (p, _, _), s in self._open.items():
                if p == who and s.recall_id == recall_id:
                    s.settled = True
