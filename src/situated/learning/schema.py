"""The attribute schema: which attributes hold one value, by kind and learned from evidence.

Kinds carry their meaning: a `fact` with an entity and attribute is single-valued (a newer
value supersedes the older one); a `preference` or `note` never supersedes by default (a user
has several preferences of one attribute). `multi_valued=True` on a memory always wins.

What the store learns, as ReMem does, is which *other* attributes hold one value. Evidence is
counted per attribute within one scope (tenant, required roles, classification; supersession
never crosses scopes):

- for single-valued: a failure that used a value after a newer value of the same
  (entity, attribute) arrived; a new value stated with replacement wording ("now", "no
  longer", "instead", "moved to", "switched to"), or that an extractor marks as replacing;
- against (counter-evidence): an older value credited in a success after a newer value
  arrived (both were right: the attribute holds several values).

The decision is a Beta(1, 1) posterior over "this attribute holds one value": learned when
P(theta > 1/2 | evidence) >= `THRESHOLD`. Counter-evidence pulls the posterior down, so it
blocks (or later revokes) the decision until single-valued evidence outweighs it. When an
attribute becomes single-valued, the conflicts already stored are superseded retroactively:
for each entity, every older value by the newest one. Each piece of evidence, and each change
of decision, is a `schema` ledger event on the memory that gave it (so it is shown to exactly
those who may read that memory: `history`, `ledger`); `stats` lists the decisions of the
scopes a principal may read.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from situated.models import Kind, LifecycleState, MemoryRecord, Principal, role_key, utcnow
from situated.store import attributes
from situated.store.ledger import EventType
from situated.store.scope import ALL_STATES, Eligibility

if TYPE_CHECKING:
    from situated.store.contract import StoreContract as Store

THRESHOLD = 0.9
"""Posterior probability of single-valuedness at which an attribute is learned single-valued
(three concordant pieces of evidence and none against: 15/16)."""

REPLACEMENT = re.compile(
    r"\b(now|no longer|not any ?more|instead|changed (?:to|from)|switched|moved|replaced|"
    r"used to|anymore|from now on)\b",
    re.I,
)

SINGLE, BLOCKED, UNDECIDED = "single", "blocked", "undecided"
PREFERS = "prefers:"
"""The attribute prefix of a preference's topic as the reader reads it (`reader.subjects`)."""


@dataclass(frozen=True)
class SchemaEntry:
    """What the store has learned about one attribute in one scope."""

    attribute: str
    roles: tuple[str, ...]
    classification: int
    single_evidence: int
    multi_evidence: int
    p_single: float
    decision: str
    """`single` (learned: newer values supersede), `blocked` (counter-evidence holds it
    back), or `undecided`."""


def p_single(single: int, multi: int) -> float:
    """P(theta > 1/2) for theta ~ Beta(1 + single, 1 + multi): for integer parameters,
    P(theta <= 1/2) = P(Binomial(a + b - 1, 1/2) >= a)."""
    a, b = 1 + single, 1 + multi
    n = a + b - 1
    tail = sum(math.comb(n, k) for k in range(a, n + 1)) / 2**n
    return float(1.0 - tail)


def decide(single: int, multi: int) -> str:
    if p_single(single, multi) >= THRESHOLD:
        return SINGLE
    return BLOCKED if multi else UNDECIDED


class AttributeSchema:
    """The attribute schema of one store (table `attribute_schema`, migration m012)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # -- what supersedes --------------------------------------------------------------------

    def supersedes(self, rec: MemoryRecord) -> bool:
        """Whether a newer value of `rec`'s (entity, attribute) supersedes it (and it older
        ones): facts by default, other kinds once their attribute is learned single-valued;
        never a memory written as multi-valued."""
        if rec.entity is None or rec.attribute is None or rec.multi_valued:
            return False
        if rec.kind is Kind.FACT:
            return True
        if rec.kind is Kind.PREFERENCE and rec.attribute.startswith(PREFERS):
            return True  # a chosen value ("prefers window seats"): one at a time
        return self._row(rec)[2] == SINGLE

    # -- evidence ---------------------------------------------------------------------------

    def failure_after_newer(self, used: MemoryRecord, newer: MemoryRecord,
                            actor: Principal) -> None:
        """A failure used `used` while `newer` (same key, another value) existed."""
        if used.value != newer.value:
            self._evidence(used, actor, single=1, why="a failure used an older value after "
                           f"a newer one ({newer.id}) arrived")

    def credit_after_newer(self, used: MemoryRecord, newer: MemoryRecord,
                           actor: Principal) -> None:
        """A success credited `used` while `newer` (same key, another value) existed."""
        if used.value != newer.value:
            self._evidence(used, actor, multi=1, why="an older value was credited after a "
                           f"newer one ({newer.id}) arrived")

    def promoted(self, rec: MemoryRecord, actor: Principal) -> None:
        """A new value was promoted: its replacement wording is evidence when an older value
        of its key with another value is there to replace."""
        if (rec.kind is not Kind.FACT and rec.attribute is not None and not rec.multi_valued
                and REPLACEMENT.search(rec.content)):
            self._replaces(rec, actor)

    def replacement_stated(self, rec: MemoryRecord, actor: Principal) -> None:
        """Stored `rec` says it replaces an earlier value (an extractor's judgement)."""
        if rec.state is LifecycleState.ACTIVE:  # a held proposal is no evidence yet
            self._replaces(rec, actor)

    def _replaces(self, rec: MemoryRecord, actor: Principal) -> None:
        if rec.entity is None or rec.attribute is None or rec.multi_valued:
            return
        if rec.kind is Kind.FACT:
            return  # facts supersede anyway
        older = [o for o in self._same_scope_key(rec)
                 if o.id != rec.id and o.value != rec.value
                 and o.validity.recorded_at_ts <= rec.validity.recorded_at_ts]
        if older:
            self._evidence(rec, actor, single=1,
                           why=f"stated as replacing an earlier value ({older[-1].id})")

    # -- reads ------------------------------------------------------------------------------

    def entries(self, principal: Principal) -> list[SchemaEntry]:
        """The schema rows of the scopes `principal` may read (its tenant, roles held,
        classification within clearance)."""
        rows = self.store.visible_attributes(principal)
        return [
            SchemaEntry(a, tuple(k for k in rk.split("\x1f") if k), c, s, m,
                        round(p_single(s, m), 4), decide(s, m))
            for a, rk, c, s, m in rows
        ]

    def entry_for(self, rec: MemoryRecord) -> SchemaEntry | None:
        """The schema row of `rec`'s attribute in `rec`'s scope (the caller may read `rec`)."""
        if rec.attribute is None:
            return None
        s, m, decision = self._row(rec)
        return SchemaEntry(rec.attribute, tuple(sorted(rec.scope.roles)),
                           int(rec.scope.classification), s, m, round(p_single(s, m), 4),
                           decision)

    # -- internals --------------------------------------------------------------------------

    def _key(self, rec: MemoryRecord) -> attributes.Key:
        assert rec.attribute is not None
        return (rec.scope.tenant, role_key(rec.scope.roles), int(rec.scope.classification),
                rec.attribute)

    def _row(self, rec: MemoryRecord) -> tuple[int, int, str]:
        s, m = self.store.attribute_counts(self._key(rec))
        return s, m, decide(s, m)

    def _evidence(self, rec: MemoryRecord, actor: Principal, *, why: str, single: int = 0,
                  multi: int = 0) -> None:
        """Count one piece of evidence (inside the caller's transaction), log it, and when
        the attribute becomes single-valued supersede its stored conflicts."""
        s0, m0, before = self._row(rec)
        s, m = s0 + single, m0 + multi
        after = decide(s, m)
        self.store.save_attribute_counts(self._key(rec), s, m)
        own = Eligibility(actor, states=ALL_STATES)
        changed = after != before
        self.store.append_event(
            rec.id, own, EventType.SCHEMA, actor.name,
            f"schema: {rec.attribute}: {why}"
            + (f"; decision {before} -> {after}" if changed else ""),
            {"attribute": rec.attribute, "evidence": "single" if single else "multi",
             "single": s, "multi": m, "p_single": round(p_single(s, m), 4),
             "decision": after, "changed": changed},
        )
        if changed and after == SINGLE:
            self._supersede_conflicts(rec, actor)

    def _same_scope_key(self, rec: MemoryRecord) -> list[MemoryRecord]:
        assert rec.entity is not None and rec.attribute is not None
        live = Eligibility.readers_of(rec.scope, (LifecycleState.ACTIVE, LifecycleState.LOW_VALUE))
        return [o for o in self.store.same_key(rec.entity, rec.attribute, live)
                if (o.scope.roles, o.scope.classification)
                == (rec.scope.roles, rec.scope.classification)]

    def _supersede_conflicts(self, rec: MemoryRecord, actor: Principal) -> None:
        """Retroactively: per namespace and entity of `rec`'s attribute in its scope (roles
        and classification), every older value (not multi-valued) is superseded by the
        newest one."""
        assert rec.attribute is not None
        live = Eligibility.readers_of(
            rec.scope, (LifecycleState.ACTIVE, LifecycleState.LOW_VALUE), same_namespace=False
        )
        groups: dict[tuple[str, str], list[MemoryRecord]] = {}
        for o in self.store.same_attribute(rec.attribute, live):
            if (o.entity is not None and not o.multi_valued
                    and (o.scope.roles, o.scope.classification)
                    == (rec.scope.roles, rec.scope.classification)
                    and o.validity.valid_until_ts > utcnow()):
                groups.setdefault((o.scope.namespace, o.entity), []).append(o)
        own = Eligibility(actor, states=ALL_STATES)
        for values in groups.values():
            values.sort(key=lambda o: (o.validity.valid_from_ts, o.validity.recorded_at_ts))
            newest = values[-1]
            for old in values[:-1]:
                if old.value == newest.value:
                    continue
                end = max(newest.validity.valid_from_ts, old.validity.valid_from_ts + 1e-6)
                self.store.supersede(
                    old.id, newest.id, min(end, old.validity.valid_until_ts), own, actor.name,
                    f"schema: {rec.attribute} learned single-valued (retroactive)",
                )
