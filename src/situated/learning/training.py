"""A training set for the reconstructor, from the store's own recalls and their outcomes.

Each example is one memory a recall served and the agent used, with the recall's outcome as
its label: the input is exactly what the `llm` reconstructor sends (its system prompt, and the
lesson, the source state, the present state and the intent as delimited untrusted data:
`recall.reconstruct.llm.render_user_message`); the target is an answer in its schema
(`RESPONSE_SCHEMA`). A model fine-tuned on it plugs back in as `reconstructor="llm"`.

- used in a success: the served verdict and its guidance adapted to the present were right;
- used in a failure: the memory should not have been applied here, so the target is
  NOT_APPLICABLE (`SOURCE_STATE_MISMATCH`), and the served answer is the rejected one.

Formats (JSON lines, TRL's conversational formats):

- `sft`: `{"messages": [system, user, assistant]}` for `trl.SFTTrainer`;
- `preference`: `{"prompt": [system, user], "chosen": [assistant], "rejected": [assistant]}`
  for `trl.DPOTrainer` (and the other preference trainers).

Eligibility is applied as on every read: the recalls are those the principal may see (its
tenant, made by principals it dominates: `scope.recall_where`), each memory is re-read through
the principal's eligibility (an erased memory, or one it may not read, gives no example), so an
export never mixes tenants; an admin exports its own tenant, one tenant at a time. Inferred
outcomes are left out unless asked for (they are weaker labels).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

from situated.errors import NotFound
from situated.models import LifecycleState, Principal, State
from situated.recall.briefing import RejectionReason, Verdict
from situated.recall.reconstruct import Policy, ReconstructionInput
from situated.recall.reconstruct.llm import SYSTEM_PROMPT, Answer, render_user_message
from situated.store.scope import Eligibility

if TYPE_CHECKING:
    from situated.store.contract import StoreContract as Store

Format = Literal["sft", "preference"]
FORMATS: tuple[str, ...] = ("sft", "preference")
NOT_APPLICABLE_RATIONALE = "The lesson does not transfer to the present state."


def examples(store: Store, principal: Principal, fmt: Format, namespace: str | None = None,
             inferred: bool = False) -> Iterator[dict[str, Any]]:
    """The training examples `principal` may export, oldest recall first."""
    elig = Eligibility.for_inspection(principal)
    for _rid, payload, success, used in store.labelled_recalls_of(principal, namespace,
                                                                 inferred):
        present = _present(payload)
        if present is None:
            continue
        for mid in used:
            recon = payload.get("reconstructions", {}).get(mid)
            if not isinstance(recon, dict):
                continue  # erased since (its reconstruction was scrubbed)
            try:
                rec = store.get(mid, elig)
            except NotFound:
                continue  # erased, or out of the principal's scope
            if rec.state is LifecycleState.ERASED or not rec.content:
                continue
            item = ReconstructionInput(
                record=rec, present=present, intent=str(payload.get("intent") or ""),
                state_similarity=None, content_similarity=0.0, relevance=0.0,
                policy=Policy(), embedder=str(payload.get("embedder") or ""),
            )
            prompt = [{"role": "system", "content": SYSTEM_PROMPT},
                      {"role": "user", "content": render_user_message(item)}]
            served = _served(recon)
            if served is None:
                continue
            against = _not_applicable(NOT_APPLICABLE_RATIONALE)
            good, bad = (served, against) if success else (against, served)
            if fmt == "sft":
                yield {"messages": [*prompt, _assistant(good)]}
            else:
                yield {"prompt": prompt, "chosen": [_assistant(good)],
                       "rejected": [_assistant(bad)]}


def _present(payload: dict[str, Any]) -> State | None:
    state = payload.get("state")
    if not isinstance(state, dict):
        return None
    try:
        return State(str(state.get("text") or ""), dict(state.get("facts") or {}))
    except ValueError:
        return None


def _served(recon: dict[str, Any]) -> dict[str, Any] | None:
    """The recorded reconstruction as an answer of the `llm` reconstructor's schema (None
    when it does not validate: nothing is exported that the reconstructor would refuse)."""
    answer = {
        "verdict": recon.get("verdict"), "confidence": float(recon.get("confidence") or 0.0),
        "guidance": recon.get("guidance") or "", "reason": recon.get("reason"),
        "rationale": recon.get("detail") or "",
        "transferable": [c[0] for c in recon.get("transferable", []) if c],
        "rejected": [{"claim": c[0], "reason": c[1] or RejectionReason.SOURCE_STATE_MISMATCH,
                      "detail": c[2] or ""} for c in recon.get("rejected", []) if c],
        "matched": list(recon.get("matched", [])), "mismatched": list(recon.get("mismatched", [])),
        "unknown": list(recon.get("unknown", [])),
        "missing_facts": list(recon.get("missing_facts", [])),
        "adaptations": list(recon.get("adaptations", [])),
    }
    try:
        return Answer.model_validate(answer).model_dump(mode="json")
    except ValueError:
        return None


def _not_applicable(rationale: str) -> dict[str, Any]:
    return Answer(
        verdict=Verdict.NOT_APPLICABLE, confidence=0.9, guidance="",
        reason=RejectionReason.SOURCE_STATE_MISMATCH, rationale=rationale, transferable=[],
        rejected=[], matched=[], mismatched=[], unknown=[], missing_facts=[], adaptations=[],
    ).model_dump(mode="json")


def _assistant(answer: dict[str, Any]) -> dict[str, str]:
    return {"role": "assistant", "content": json.dumps(answer, ensure_ascii=False)}
