"""Maintenance of the PostgreSQL store (SYSTEM scope, never handed to a caller): failures,
lifecycle sweeps, ledger replay and repair, integrity and orphan checks."""

from __future__ import annotations

from situated.models import Counters, LifecycleState, Principal
from situated.store.ledger import EventType, Folded, LedgerEvent, replay
from situated.store.pg.recalls import Recalls
from situated.store.scope import SYSTEM, System
from situated.store.sqlite import _utility_delta, _utility_namespace
from situated.store.values import RebuildReport


class Upkeep(Recalls):
    """Health and maintenance reads and the ledger replay."""

    def failures(self, scope: Principal | System) -> dict[str, int]:
        """Failures by component: every one for `SYSTEM` (health), else those about memories
        the principal may read (its tenant, roles held, clearance)."""
        if isinstance(scope, System):
            where, params = "TRUE", []
        else:
            where = "tenant = %s AND classification <= %s AND role_set <@ %s::text[]"
            params = [scope.tenant, int(scope.clearance), sorted(scope.roles)]
        return {
            str(c): int(n) for c, n in self._all(
                f"SELECT component, COUNT(*) FROM maintenance_failures WHERE {where} "
                "GROUP BY component", params,
            )
        }

    def recent_failures(self, since: float, scope: System) -> dict[str, tuple[int, float, str]]:
        return {
            str(c): (int(n), float(at), str(err)) for c, n, at, err in self._all(
                "SELECT f.component, COUNT(*), MAX(f.at), (SELECT g.error FROM "
                "maintenance_failures g WHERE g.component = f.component ORDER BY g.at DESC, "
                "g.id DESC LIMIT 1) FROM maintenance_failures f WHERE f.at >= %s "
                "GROUP BY f.component", (since,),
            )
        }

    def lifecycle_candidates(self, scope: System) -> list[tuple[str, str, str, Counters]]:
        return [
            (str(m), str(t), str(st), Counters(*c)) for m, t, st, *c in self._all(
                "SELECT id, tenant, state, uses, successes, failures, exposures FROM memories "
                "WHERE state IN ('ACTIVE', 'LOW_VALUE') ORDER BY rid"
            )
        ]

    def low_value_since(self, memory_id: str, scope: System) -> float | None:
        row = self._one(
            "SELECT MAX(at) FROM ledger WHERE memory_id = %s AND event = 'transitioned' "
            "AND data::jsonb ->> 'to' = 'LOW_VALUE'",
            (memory_id,),
        )
        return None if row is None or row[0] is None else float(row[0])

    def rebuild(self, repair: bool = False) -> RebuildReport:
        """Replay every memory's ledger events and compare with the stored state, counters and
        per-namespace utility (repairing them from the replay when asked)."""
        with self.snapshot():
            stored = {
                str(r[0]): Folded(LifecycleState(r[1]), Counters(*r[2:])) for r in self._all(
                    "SELECT id, state, uses, successes, failures, exposures FROM memories"
                )
            }
            events: dict[str, list[LedgerEvent]] = {}
            for ev in self._events("memory_id IS NOT NULL", (), SYSTEM):
                assert ev.memory_id is not None
                events.setdefault(ev.memory_id, []).append(ev)
            per_ns_stored = {
                (str(m), str(n)): (int(u), int(s), int(iu), int(is_))
                for m, n, u, s, iu, is_ in self._all(
                    "SELECT memory_id, namespace, uses, successes, inferred_uses, "
                    "inferred_successes FROM memory_utility"
                )
            }
        bad = {mid for mid, have in stored.items() if replay(events.get(mid, [])) != have}
        per_ns_replayed: dict[tuple[str, str], tuple[int, int, int, int]] = {}
        for mid, evs in events.items():
            for ev in evs:
                if ev.event is EventType.FEEDBACK and ev.data.get("credit") in ("credited",
                                                                                "blamed"):
                    key = (mid, _utility_namespace(ev.data))
                    was = per_ns_replayed.get(key, (0, 0, 0, 0))
                    d = _utility_delta(ev.data)
                    per_ns_replayed[key] = (was[0] + d[0], was[1] + d[1], was[2] + d[2],
                                            was[3] + d[3])
        bad |= {m for (m, _n) in set(per_ns_stored) ^ set(per_ns_replayed)}
        bad |= {k[0] for k, v in per_ns_stored.items() if per_ns_replayed.get(k) != v}
        mismatched = sorted(bad)
        if repair and mismatched:
            self._repair(mismatched, events, per_ns_replayed)
        return RebuildReport(len(stored), tuple(mismatched), repair and bool(mismatched))

    def _repair(
        self, bad: list[str], events: dict[str, list[LedgerEvent]],
        per_ns: dict[tuple[str, str], tuple[int, int, int, int]],
    ) -> None:
        tenants = {ev.tenant for mid in bad for ev in events.get(mid, [])}
        with self.transaction():
            for tenant in sorted(tenants):  # one order: two repairs cannot deadlock
                self._lock(tenant)
            self._count("generation")
            for mid in bad:
                f = replay(events.get(mid, []))
                if f is None:
                    continue
                c = f.counters
                self._run(
                    "UPDATE memories SET state = %s, uses = %s, successes = %s, failures = %s, "
                    "exposures = %s WHERE id = %s",
                    (f.state.value, c.uses, c.successes, c.failures, c.exposures, mid),
                )
            self._run("DELETE FROM memory_utility WHERE memory_id = ANY(%s::text[])", (bad,))
            for (mid, ns), counts in per_ns.items():
                if mid in bad:
                    tenant = events[mid][0].tenant
                    self._run(
                        "INSERT INTO memory_utility (tenant, memory_id, namespace, uses, "
                        "successes, inferred_uses, inferred_successes) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        (tenant, mid, ns, *counts),
                    )

    def integrity(self) -> str:
        """'ok', or what disagrees: each tenant's BM25 statistics against its indexed rows,
        and erased rows still holding text, vectors or a lexical row."""
        with self.snapshot():
            stats = self._one(
                "SELECT COUNT(*) FROM (SELECT m.tenant, COUNT(*) AS docs, SUM(m.lex_len) AS len "
                "FROM memories m WHERE m.lex IS NOT NULL GROUP BY m.tenant) c "
                "FULL JOIN lexicon_stats s ON s.tenant = c.tenant "
                "WHERE coalesce(c.docs, 0) <> coalesce(s.docs, 0) "
                "OR coalesce(c.len, 0) <> coalesce(s.length, 0)"
            )
            vec = " OR content_vec IS NOT NULL OR state_vec IS NOT NULL" if self.dim else ""
            erased = self._one(
                "SELECT COUNT(*) FROM memories m WHERE state = 'ERASED' AND (content <> '' "
                "OR lex IS NOT NULL OR EXISTS (SELECT 1 FROM lexicon_postings p "
                f"WHERE p.tenant = m.tenant AND p.rid = m.rid){vec})"
            )
        problems = []
        if stats and int(stats[0]):
            problems.append(f"lexicon statistics disagree for {int(stats[0])} tenant(s)")
        if erased and int(erased[0]):
            problems.append(f"{int(erased[0])} erased row(s) still hold content")
        return "; ".join(problems) or "ok"

    def orphans(self) -> int:
        """Memories (not erased) without both vectors (must be zero)."""
        self._read_dim()
        if self.dim is None:
            return 0
        row = self._one(
            "SELECT COUNT(*) FROM memories WHERE state <> 'ERASED' "
            "AND (content_vec IS NULL OR state_vec IS NULL)"
        )
        return int(row[0]) if row else 0
