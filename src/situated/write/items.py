"""Items of a batch (`Memory.add_many`, `Memory.import_records`): one mapping of `add`
arguments each, validated into a `Proposal` or refused with the item and field named."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from situated import arguments as args
from situated.errors import InvalidInput, PermissionDenied
from situated.models import (
    Authority,
    Classification,
    Kind,
    Principal,
    from_epoch,
    to_epoch,
    utcnow,
)
from situated.write.writer import Proposal

if TYPE_CHECKING:
    from situated.memory import Memory

ADD_DEFAULTS: dict[str, Any] = {
    "kind": Kind.LESSON, "namespace": "default", "state": None, "action": None,
    "success": None, "reward": None, "episode_id": None, "step": None, "evidence": (),
    "conditions": (), "entity": None, "attribute": None, "value": None, "multi_valued": False,
    "roles": (), "classification": None, "consent": None,
    "authority": Authority.INFERRED, "valid_from": None, "valid_until": None,
    "policy_version": None,
}
ADD_FIELDS = frozenset({"content", "source_classification", *ADD_DEFAULTS})
IMPORT_FIELDS = ADD_FIELDS | {"recorded_at"}
"""An imported memory may also carry when it was first recorded (admins only)."""


def source_level(value: Any) -> Classification | None:
    """`source_classification`: None or a classification."""
    return None if value is None else args.choice(Classification, value, "source_classification")


def proposal(
    mem: Memory, item: Any, principal: Principal, where: str, fields: frozenset[str] = ADD_FIELDS
) -> Proposal:
    """The validated record of one item (`where` names it in errors: `items[3]`, `line 7`).

    `recorded_at` (only where `fields` has it) sets the record's `recorded_at`, and its
    `valid_from` unless given; only an admin may state it (PermissionDenied otherwise).

    Raises:
        InvalidInput: `<where>.<field>`, nothing written.
    """
    if not isinstance(item, Mapping):
        raise InvalidInput(where, "must be a mapping of add() arguments")
    kw = dict(item)
    unknown = sorted(str(k) for k in set(kw) - fields)
    if unknown:
        refused = args.unknown_argument(unknown[0], sorted(fields))
        raise InvalidInput(f"{where}.{refused.field}", refused.message)
    if "content" not in kw:
        raise InvalidInput(f"{where}.content", "is required")
    source_cls = kw.pop("source_classification", None)
    recorded = kw.pop("recorded_at", None)
    try:
        at = to_epoch(recorded, "recorded_at") if recorded is not None else None
        if at is not None:
            if "admin" not in principal.roles:
                raise PermissionDenied(
                    f"{where}.recorded_at: only an admin may import a memory's original "
                    "recorded_at"
                )
            if at > utcnow():
                raise InvalidInput("recorded_at", "must not be in the future")
            if kw.get("valid_from") is None:
                kw["valid_from"] = at
        rec = mem._build(
            principal=principal, content=kw["content"],
            **{k: kw.get(k, v) for k, v in ADD_DEFAULTS.items()},
        )
        source_level(source_cls)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}.{exc.field}", exc.message) from None
    if at is not None:
        rec = rec.model_copy(update={"validity": rec.validity.model_copy(
            update={"recorded_at": from_epoch(at)})})
    return Proposal(rec, source_cls)
