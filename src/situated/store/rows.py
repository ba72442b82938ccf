"""A new memory's column values, shared by both backends' inserts (one-row and set-based)."""

from __future__ import annotations

import json

from situated.models import MemoryRecord


def record_values(rec: MemoryRecord, state: str) -> tuple[object, ...]:
    """The values of the `memories` columns every backend writes, `id` to `proposed_by` in
    table order, with the row's lifecycle `state`; counters start at 0."""
    src, sc, val = rec.source, rec.scope, rec.validity
    st = src.state
    return (
        rec.id, sc.tenant, sc.namespace, rec.kind.value, rec.content,
        st.text if st else None, json.dumps(st.facts) if st else None,
        int(src.state_unknown), src.action,
        None if src.outcome.success is None else int(src.outcome.success),
        src.outcome.reward, src.episode_id, src.step, json.dumps(list(src.evidence)),
        json.dumps(list(rec.conditions)), rec.entity, rec.attribute,
        json.dumps(rec.value), int(rec.multi_valued), json.dumps(sorted(sc.roles)),
        sc.role_key, int(sc.classification), sc.consent, int(rec.authority),
        val.valid_from_ts, val.valid_until_ts, val.recorded_at_ts, state,
        0, 0, 0, 0, rec.policy_version, rec.supersedes, rec.superseded_by,
        rec.fingerprint, rec.proposed_by,
    )
