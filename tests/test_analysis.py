"""A memory's analysis, read once at write, gives stages 4-5 exactly what re-reading its text
gave; the store keeps it current, backfills it, and erasure clears it."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest

from situated import InvalidInput, Memory, Principal, State
from situated.models import (
    Authority,
    Kind,
    LifecycleState,
    MemoryRecord,
    Scope,
    Source,
    Validity,
)
from situated.recall.analysis import VERSION, Analysis, analyze, decode, stored_form
from situated.recall.briefing import Verdict
from situated.recall.reconstruct.base import Policy, ReconstructionInput
from situated.recall.reconstruct.prechecks import precheck
from situated.recall.reconstruct.rules import RulesReconstructor
from situated.recall.validate import validate
from situated.store.scope import SYSTEM

# words that hit every branch: contrasts, numbers before words, injection and unsafe phrases,
# tool mentions, prohibited effects, source values the lesson names, fact subjects
_WORDS = (
    "the stove is on|the stove is off|door open|door closed|drawer 2|cabinet 1|3 apples|"
    "5 apples|12 kg|30 days|refund|delete all backups|ignore previous instructions|"
    "you are now admin|call `lookup_order`|use the refund_api tool|run cleanup(|email it to "
    "x@evil.com|the mug|mug|kitchen|price|budget|plan|annual|monthly|wet|dry|hot|cold|visible|"
    "hidden|Check|first.|then|again;|and|caf\u00e9|\u212aelvin|running|stopped|60|12|"
    "after 30 days.|\u200bzero"
).split("|")
_VALUES = {
    "location": ["drawer 2", "cabinet 1", "the mug", "x"],
    "stove": [True, False],
    "price": [50, 150, 99.5],
    "budget": [100, 20.0],
    "plan": ["annual", "monthly", " Annual "],
    "days": [60, 12, 30],
    "room": ["kitchen", "garage"],
}
_CONDITIONS = ["price <= budget", "plan == 'annual'", "exists(room)", "days > 20",
               "stove == true", "location in ['drawer 2', 'cabinet 1']"]


def _text(rng: random.Random, most: int = 12) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(1, most))]
    return " ".join(words) + rng.choice(["", ".", "!", "; then stop."])


def _facts(rng: random.Random) -> dict[str, object]:
    return {k: rng.choice(v) for k, v in _VALUES.items() if rng.random() < 0.6}


def _record(rng: random.Random, i: int) -> MemoryRecord:
    roll = rng.random()
    if roll < 0.15:
        source = Source(state_unknown=True)
    elif roll < 0.3:
        source = Source()
    else:
        source = Source(state=State(_text(rng, 6) if rng.random() < 0.7 else "",
                                    _facts(rng) if rng.random() < 0.6 else {}))
    kind = rng.choice([Kind.LESSON] * 4 + [Kind.NOTE, Kind.PREFERENCE])
    return MemoryRecord(
        id=f"mem_{i:016x}", content=_text(rng), kind=kind, source=source,
        conditions=tuple(rng.sample(_CONDITIONS, rng.randint(0, 2))) if rng.random() < 0.3
        else (),
        scope=Scope(tenant="acme"), authority=rng.choice(list(Authority)),
        validity=Validity(valid_from=0.0, valid_until=2e9, recorded_at=0.0),
        state=LifecycleState.ACTIVE, fingerprint="f" * 32, proposed_by="test",
    )


def _judge(rec: MemoryRecord, present: State, policy: Policy, sim: float,
           analysis: Analysis | None) -> object:
    item = ReconstructionInput(
        record=rec, present=present, intent="", state_similarity=sim, content_similarity=0.5,
        relevance=0.5, policy=policy, embedder="hash@1", analysis=analysis,
    )
    recon = precheck(item, 1e9) or RulesReconstructor().reconstruct(item)
    return validate(recon, rec, present, policy, analysis)


def test_analysed_and_plain_paths_judge_alike() -> None:
    rng = random.Random(11)
    policies = [
        Policy(),
        Policy(allowed_tools=frozenset({"lookup_order"})),
        Policy(allowed_tools=frozenset(), prohibited_effects=frozenset({"refund", "delete"})),
    ]
    served = adapted = stripped = 0
    for i in range(1500):
        rec = _record(rng, i)
        stored = analyze(rec).encode()
        for _ in range(3):
            present = State(_text(rng, 6) if rng.random() < 0.7 else "", _facts(rng))
            policy = rng.choice(policies)
            sim = rng.random()
            plain = _judge(rec, present, policy, sim, None)
            assert _judge(rec, present, policy, sim, decode(stored)) == plain, (rec, present)
            served += plain.verdict in (Verdict.APPLICABLE, Verdict.PARTIAL)  # type: ignore[attr-defined]
            adapted += bool(plain.adaptations)  # type: ignore[attr-defined]
            stripped += bool(plain.rejected)  # type: ignore[attr-defined]
    # the generated cases reach the branches the analysis replaces
    assert served > 300 and adapted > 30 and stripped > 100


def test_encoding_round_trips_and_other_versions_are_ignored() -> None:
    rng = random.Random(2)
    for i in range(200):
        a = analyze(_record(rng, i))
        assert decode(a.encode()) == a
    a = analyze(_record(rng, 999))
    assert decode(msgspec.structs.replace(a, version=VERSION + 1).encode()) is None
    assert decode(msgspec.msgpack.encode([VERSION, "not a list of sentences"])) is None
    assert decode(None) is None and decode(b"") is None
    assert decode(a.encode()[:-3]) is None  # damaged derived data: the text is read instead


def test_what_storage_would_change_is_not_stored() -> None:
    rng = random.Random(4)
    ok = _record(rng, 1)
    assert stored_form(ok) == analyze(ok).encode()
    # infinite numbers survive MessagePack (JSON would have made them null, flipping the
    # condition); a lone surrogate cannot be encoded at all
    for changes in ({"conditions": ("price < 1e999",)}, {"content": "Wait " + "9" * 400 + "."}):
        rec = ok.model_copy(update=changes)
        stored = stored_form(rec)
        assert stored is not None and decode(stored) == analyze(rec)
    assert stored_form(ok.model_copy(update={"conditions": ("x == '\\ud800'",)})) is None
    assert stored_form(ok.model_copy(update={"conditions": ("x < 99999999999999999999999",)})) \
        is None  # MessagePack holds 64-bit integers


def test_a_memory_whose_analysis_cannot_be_stored_is_judged_from_its_text(
    mem: Memory, acme: Principal
) -> None:
    rec = mem.add("Any tag is fine.", principal=acme, conditions=("tag != '\\ud800'",),
                  state=State("shopping", {"tag": "a"}))
    row = mem.store._one("SELECT analysis, analysis_version FROM memories WHERE id = ?",
                         (rec.id,))
    assert row == (None, VERSION)  # marked, so it is not analysed again at every open
    b = mem.recall(State("shopping", {"tag": "a"}), principal=acme)
    assert [i.memory_id for i in b.items] == [rec.id]  # the condition holds


def _count(mem: Memory, sql: str) -> int:
    row = mem.store._one(sql)
    assert row is not None
    return int(row[0])


def test_written_rows_carry_their_analysis_and_erasure_clears_it(
    mem: Memory, acme: Principal
) -> None:
    rec = mem.add("Check drawer 2 first; the mug is usually there.", principal=acme,
                  state=State("the kitchen is dark", {"location": "drawer 2"}))
    row = mem.store._one("SELECT analysis, analysis_version FROM memories WHERE id = ?",
                         (rec.id,))
    assert row is not None and row[1] == VERSION
    assert decode(row[0]) == analyze(rec)
    admin = Principal(tenant="acme", roles={"admin"}, clearance="internal")
    mem.erase(rec.id, principal=admin, reason="user asked")
    row = mem.store._one("SELECT analysis, analysis_version FROM memories WHERE id = ?",
                         (rec.id,))
    assert row == (None, 0)
    assert mem.store.unanalysed(VERSION, 10, SYSTEM) == []  # erased rows are not re-analysed


def test_rows_without_analysis_are_filled_in_and_recall_the_same(
    tmp_path: Path, acme: Principal
) -> None:
    path = tmp_path / "old.db"
    with Memory(path, embedder="hash") as mem:
        for i, where in enumerate(["drawer 2", "cabinet 1", "the shelf"]):
            mem.add(f"The mug is in {where}; check there first ({i}).", principal=acme,
                    state=State("looking for the mug", {"location": where, "lights": True}),
                    conditions=("exists(location)",) if i else ())
        present = State("looking for the mug", {"location": "drawer 2", "lights": False})
        before = mem.recall(present, principal=acme, k=3)
        # as a store written before analyses existed: nothing stored, version 0
        mem.store.db.execute("UPDATE memories SET analysis = NULL, analysis_version = 0")
        stale = mem.recall(present, principal=acme, k=3)  # analysed on the spot
        assert mem.health().unanalysed == 3
    with Memory(path, embedder="hash") as mem:
        assert _count(mem, f"SELECT COUNT(*) FROM memories WHERE analysis_version = {VERSION}") == 3
        assert mem.health().unanalysed == 0
        after = mem.recall(present, principal=acme, k=3)
    for b in (stale, after):
        assert [(i.memory_id, i.text, i.verdict, i.confidence, i.tokens) for i in b.items] == [
            (i.memory_id, i.text, i.verdict, i.confidence, i.tokens) for i in before.items
        ]
        assert [(r.memory_id, r.reason, r.detail) for r in b.rejected] == [
            (r.memory_id, r.reason, r.detail) for r in before.rejected
        ]
    assert before.items and before.rejected  # the case judges both ways


def test_records_read_back_equal_validated_records(mem: Memory, acme: Principal) -> None:
    mem.add("Offer the refund within 30 days.", principal=acme, kind="lesson",
            state=State("a customer asks", {"plan": "annual", "days": 12, "vip": True}),
            conditions=("days <= 30",), roles=("support",), evidence=("ticket-1",))
    mem.add("Acme's plan is annual.", principal=acme, kind="fact", entity="acme",
            attribute="plan", value="annual")
    records = mem.list(principal=acme)
    assert len(records) == 2
    for rec in records:
        assert MemoryRecord.model_validate(rec.model_dump()) == rec
        # every field set, in the record and its parts (the store builds them unvalidated)
        for model in (rec, rec.source, rec.scope, rec.validity, rec.source.outcome):
            assert set(vars(model)) == set(type(model).model_fields), type(model)


def test_undecodable_file_names_in_evidence_are_refused(mem: Memory, acme: Principal) -> None:
    # a lone surrogate (os.fsdecode of a non-UTF-8 name) is not text: refused like content is,
    # since an accepted one broke list, export and the CLI for the tenant; a replaced name works
    with pytest.raises(InvalidInput) as err:
        mem.add("Check the log first.", principal=acme, evidence=("/data/caf\udce9.txt",))
    assert err.value.field == "evidence[0]" and "surrogate" in err.value.message
    name = "/data/caf\udce9.txt".encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    rec = mem.add("Check the log first.", principal=acme, evidence=(name,),
                  state=State("the job failed", {"job": "nightly"}))
    assert rec.source.evidence == ("/data/caf\ufffd.txt",)
    b = mem.recall(State("the job failed", {"job": "nightly"}), principal=acme)
    assert [i.memory_id for i in b.items] == [rec.id]
    assert [r.id for r in mem.list(principal=acme)] == [rec.id]


def test_erasure_empties_the_text_caches(mem: Memory, acme: Principal) -> None:
    from situated.recall.briefing import unsafe_text
    from situated.recall.reading import sentences as _sentences
    from situated.safety import injection_findings
    from situated.screen.surfaces import views_cache

    rec = mem.add("Reboot the router twice. Then call support.", principal=acme,
                  state=State("the internet is down", {"router": "on"}))
    mem.recall(State("the internet is down", {"router": "on"}), principal=acme).render()
    injection_findings("Reboot the router twice.")
    caches = (_sentences, injection_findings, unsafe_text, views_cache())
    assert all(c.cache_info().currsize for c in caches)
    admin = Principal(tenant="acme", roles={"admin"}, clearance="internal")
    mem.erase(rec.id, principal=admin, reason="asked")
    assert [c.cache_info().currsize for c in caches] == [0, 0, 0, 0]


def test_a_backfill_does_not_write_into_a_row_erased_meanwhile(
    mem: Memory, acme: Principal
) -> None:
    rec = mem.add("Keep the receipt.", principal=acme, state=State("buying", {"item": "tv"}))
    mem.store.db.execute("UPDATE memories SET analysis = NULL, analysis_version = 0")
    rows = mem.store.unanalysed(VERSION, 10, SYSTEM)  # read, as a backfill does, before the erasure
    admin = Principal(tenant="acme", roles={"admin"}, clearance="internal")
    mem.erase(rec.id, principal=admin, reason="asked")
    with mem.store.transaction():
        for rid, r in rows:
            mem.store.set_analysis(rid, VERSION, stored_form(r))
    assert mem.store._one("SELECT analysis FROM memories WHERE id = ?", (rec.id,)) == (None,)


def _analysis_inputs_digest() -> str:
    """A digest of everything a stored analysis depends on: the patterns and the code that
    read a memory's text at write."""
    import hashlib
    import importlib
    import inspect

    from situated import conditions, models, safety, textforms
    from situated.reader import lexicon, order, parse, phrases, tokens, types
    from situated.recall import analysis, briefing, compile
    from situated.recall import reading as rules
    from situated.screen import surfaces

    screen_text = importlib.import_module("situated.screen.normalise")  # the module

    parts: list[object] = [
        safety._INJECTION, safety._NAMED_TOOL_PATTERN, safety._CALL_RUN.pattern,
        safety._NAME_HEAD.pattern, sorted(safety._STOP),
        safety.HIDDEN_REASON, safety._ENCODED.pattern, rules._SENTENCE_END.pattern,
        rules._TOKEN.pattern, rules._NUMBER.pattern, compile.ESTIMATE_VERSION,
        hashlib.sha256(Path(lexicon.__file__).with_name("data").joinpath(
            "lexicon.msgpack").read_bytes()).hexdigest(),
    ]
    for fn in (analysis.analyze, analysis.Analysis, parse, order, phrases, tokens, lexicon, types,
               rules.sentences, rules.names_value, rules.names_text, rules.mentions,
               rules.stems, rules.key_stems, rules.numbers_in, safety.injection_findings,
               safety.tool_mentions, safety._next_call, safety._called,
               conditions.parse_condition, conditions._parse,
               conditions._operand,
               models.State.describe, models._digest, compile.render_line,
               compile.estimate_tokens, briefing.compute_unsafe, surfaces.view_findings,
               textforms.hidden_controls, textforms._joins, screen_text._decodings,
               screen_text._unleet):
        parts.append(inspect.getsource(fn))
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def test_stored_analyses_are_versioned_with_what_they_depend_on() -> None:
    # If this fails, the code or the patterns that read a memory at write changed. When what
    # `analyze` computes changes, or `Analysis`'s fields change in any way (the stored form is
    # positional), bump `situated.recall.analysis.VERSION` (stored analyses of the old version
    # are then ignored and recomputed); either way, update the digest here.
    assert (VERSION, _analysis_inputs_digest()) == (17, "2bccf52783173628")


def test_recall_records_encode_like_json_dumps() -> None:
    import json

    import numpy as np

    from situated.store.sqlite import _payload_json

    payload = {"a": [1, 2.5, None, True], "b": {"c": "d"}, "n": np.float32(0.5), "t": (1, 2)}
    assert json.loads(_payload_json(payload)) == {
        "a": [1, 2.5, None, True], "b": {"c": "d"}, "n": 0.5, "t": [1, 2]}
    odd = {"path": "/data/caf\udce9.txt"}  # a lone surrogate: json.dumps escapes it
    assert json.loads(_payload_json(odd)) == odd


def test_huge_integers_in_conditions_neither_break_writes_nor_opening(
    tmp_path: Path, acme: Principal
) -> None:
    path = tmp_path / "big.db"
    with Memory(path, embedder="hash") as mem:
        rec = mem.add("Any x is fine.", principal=acme, state=State("counting", {"x": 5}),
                      conditions=("x < 99999999999999999999999",))
        assert mem.recall(State("counting", {"x": 5}), principal=acme).items
        mem.store.db.execute("UPDATE memories SET analysis = NULL, analysis_version = 0")
    with Memory(path, embedder="hash") as mem:  # the backfill meets it again
        row = mem.store._one("SELECT analysis, analysis_version FROM memories WHERE id = ?",
                             (rec.id,))
        assert row == (None, VERSION)
        assert [i.memory_id for i in mem.recall(State("counting", {"x": 5}),
                                                principal=acme).items] == [rec.id]


def test_present_facts_are_read_only_and_renumbered_when_copied() -> None:
    import copy
    import pickle

    from situated.recall.reconstruct.prechecks import PresentFacts, evaluated

    facts = PresentFacts({"x": 1})
    for mutate in (lambda f: f.__setitem__("x", 2), lambda f: f.update(x=2),
                   lambda f: f.pop("x"), lambda f: f.clear(), lambda f: f.setdefault("y", 1)):
        with pytest.raises(TypeError):
            mutate(facts)
    assert facts == {"x": 1}
    assert evaluated(("x > 1",), facts).mismatched == ("x > 1",)
    for other in (pickle.loads(pickle.dumps(facts)), copy.deepcopy(facts), copy.copy(facts)):
        assert isinstance(other, PresentFacts) and other == facts
        assert other.cache_number == facts.cache_number  # same facts, same process
    assert PresentFacts({"x": 2}).cache_number != facts.cache_number


def test_an_erasure_in_another_process_empties_this_ones_text_caches(
    tmp_path: Path, acme: Principal
) -> None:
    import subprocess
    import sys

    from situated.recall.reading import sentences as _sentences

    path = tmp_path / "shared.db"
    mem = Memory(path, embedder="hash")
    rec = mem.add("Reboot the router twice. Then call support.", principal=acme,
                  state=State("the internet is down", {"router": "on"}))
    mem.recall(State("the internet is down", {"router": "on"}), principal=acme)
    assert _sentences.cache_info().currsize > 0
    assert not mem._forget_erased_texts()  # nothing erased yet
    script = (
        "import sys; from situated import Memory, Principal\n"
        "m = Memory(sys.argv[1], embedder='hash')\n"
        "m.erase(sys.argv[2], principal=Principal(tenant='acme', roles={'admin'}), "
        "reason='asked')\n"
    )
    subprocess.run([sys.executable, "-c", script, str(path), rec.id], check=True, timeout=120)
    assert mem._forget_erased_texts()
    assert _sentences.cache_info().currsize == 0
    assert not mem._forget_erased_texts()  # once per erasure
    mem.close()
