"""Tenant, namespace and role names: one rule (`situated.names`), and no look-alikes in a store."""

from __future__ import annotations

import string
import tempfile
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from conftest import snapshot
from situated import InvalidInput, Memory, Principal
from situated.names import MAX_NAME_CHARS, canonical_actor, canonical_name, skeleton

REFUSED_CATEGORIES = {"Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cn", "Cs"}
INVISIBLE = [  # not Cf, yet print as nothing or as a blank
    "\u034f",  # COMBINING GRAPHEME JOINER
    "\ufe0f", "\ufe00", "\U000e0100",  # variation selectors
    "\u115f", "\u1160", "\u3164", "\uffa0",  # Hangul fillers
    "\u2800",  # BRAILLE PATTERN BLANK
]
# A few of Unicode's confusables.txt pairs, by character name: each prints like the ASCII letter
# but is another letter, so NFKC keeps it apart and only the skeleton can tell.
CONFUSABLE = {
    "a": ["CYRILLIC SMALL LETTER A", "GREEK SMALL LETTER ALPHA"],
    "c": ["CYRILLIC SMALL LETTER ES"],
    "d": ["CYRILLIC SMALL LETTER KOMI DE"],
    "e": ["CYRILLIC SMALL LETTER IE"],
    "h": ["CYRILLIC SMALL LETTER SHHA"],
    "i": ["CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I", "GREEK SMALL LETTER IOTA"],
    "j": ["CYRILLIC SMALL LETTER JE"],
    "o": ["CYRILLIC SMALL LETTER O", "GREEK SMALL LETTER OMICRON"],
    "p": ["CYRILLIC SMALL LETTER ER", "GREEK SMALL LETTER RHO"],
    "q": ["CYRILLIC SMALL LETTER QA"],
    "s": ["CYRILLIC SMALL LETTER DZE"],
    "u": ["GREEK SMALL LETTER UPSILON"],
    "v": ["GREEK SMALL LETTER NU"],
    "w": ["CYRILLIC SMALL LETTER WE"],
    "x": ["CYRILLIC SMALL LETTER HA"],
    "y": ["CYRILLIC SMALL LETTER U"],
    "-": ["HYPHEN", "NON-BREAKING HYPHEN"],
}


def _compatibility(ch: str) -> list[str]:
    """Full-width and mathematical forms of an ASCII letter or digit (NFKC folds them back)."""
    if ch.isalpha():
        forms = ["FULLWIDTH LATIN SMALL LETTER", "MATHEMATICAL BOLD SMALL",
                 "MATHEMATICAL SANS-SERIF SMALL", "MATHEMATICAL MONOSPACE SMALL"]
        return [unicodedata.lookup(f"{f} {ch.upper()}") for f in forms]
    if ch.isdigit():
        digit = unicodedata.name(ch).split()[-1]
        return [unicodedata.lookup(f"{f} {digit}") for f in ("FULLWIDTH DIGIT",
                                                             "MATHEMATICAL BOLD DIGIT")]
    return []


LOOKALIKES = {
    ch: [unicodedata.lookup(n) for n in CONFUSABLE.get(ch, [])] + _compatibility(ch)
    for ch in string.ascii_lowercase + string.digits + "-"
}
LOOKALIKES = {ch: subs for ch, subs in LOOKALIKES.items() if subs}

ascii_names = st.text(string.ascii_lowercase + string.digits + "-_.", min_size=1, max_size=24)
refused_chars = st.one_of(
    st.characters(categories=sorted(REFUSED_CATEGORIES)),
    st.sampled_from(["\u2028", "\u2029", " ", "\u00a0", "\t", "\n", "\u200b", "\u202e",
                     "\u2066", "\ufeff", "\u00ad", *INVISIBLE]),
)


@contextmanager
def fresh_memory() -> Iterator[Memory]:
    with tempfile.TemporaryDirectory() as d:
        mem = Memory(Path(d) / "m.db", embedder="hash", resident_mb=0)
        try:
            yield mem
        finally:
            mem.close()


def _accepted(name: str) -> None:
    """What every accepted name is: NFKC-stable, bounded, free of refused characters."""
    assert name == unicodedata.normalize("NFKC", name)
    assert canonical_name(name) == name
    assert 1 <= len(name) <= MAX_NAME_CHARS
    assert not unicodedata.category(name[0]).startswith("M")
    for ch in name:
        assert unicodedata.category(ch) not in REFUSED_CATEGORIES, ch
        assert ch not in INVISIBLE, ch


# -- the rule -------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(st.one_of(
    st.text(max_size=120),
    ascii_names,
    st.text(st.characters(categories=["Mn", "Mc", "Me", "Ll"]), min_size=1, max_size=4),
    st.text(st.sampled_from("a\ufb03\u3371\u2474\uff41"), min_size=20, max_size=100),  # NFKC grows
))
@example("\u0301acme")
@example("\ufb03" * 40)
def test_every_accepted_name_is_nfkc_stable_and_clean(value: str) -> None:
    try:
        name = canonical_name(value, "tenant")
    except InvalidInput as exc:
        assert exc.field == "tenant"
        return
    assert name == unicodedata.normalize("NFKC", value)  # accepted in its NFKC form
    _accepted(name)
    assert Principal(tenant=value, roles={value}).tenant == name


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
@example(" agent")
@example("agent ")
@example("support  bot")
def test_every_accepted_actor_name_is_nfkc_stable_with_single_inner_spaces(value: str) -> None:
    try:
        name = canonical_actor(value)
    except InvalidInput:
        return
    assert name == unicodedata.normalize("NFKC", value)
    assert name == name.strip(" ") and "  " not in name
    _accepted(name.replace(" ", "-"))


def test_compatibility_forms_are_the_plain_name() -> None:
    assert Principal(tenant="ａｃｍｅ").tenant == "acme"
    assert Principal(tenant="𝐚𝐜𝐦𝐞", roles={"ｏｐｓ"}).roles == frozenset({"ops"})
    assert Principal(tenant="acme", name="Ada Lovelace").name == "Ada Lovelace"
    with pytest.raises(InvalidInput):  # NFKC would make it a space, but it is refused first
        Principal(tenant="acme", name="Ada\u2003Lovelace")


@pytest.mark.parametrize("value", ["acme ", " acme", "\tacme", "acme\u00a0", "acme\u2028",
                                   "ac\u200bme", "\u202eacme", "", "x" * (MAX_NAME_CHARS + 1)])
def test_whitespace_is_refused_not_stripped(value: str) -> None:
    with pytest.raises(InvalidInput) as err:
        Principal(tenant=value)
    assert err.value.field == "principal.tenant"
    if value.strip() != value:
        assert any(w in err.value.message for w in ("whitespace", "separator", "control"))


def test_each_refusal_says_what_it_found() -> None:
    for value, what in (("caf\udce9", "surrogate"), ("a\ue000", "private-use"),
                        ("a\u0378", "unassigned"), ("a\u200db", "format"),
                        ("a\ufe0fb", "blank"), ("a\x7f", "control")):
        with pytest.raises(InvalidInput) as err:
            Principal(tenant=value)
        assert what in err.value.message, (value, err.value.message)


def test_names_are_bounded_at_100_characters() -> None:
    assert MAX_NAME_CHARS == 100  # the documented bound (README, situated.names)
    assert Principal(tenant="x" * 100, roles={"r" * 100}, name="n" * 100).tenant == "x" * 100
    for too_long in ("x" * 101, "\ufb03" * 34):  # 101 characters, or 102 once NFKC spells ffi
        with pytest.raises(InvalidInput) as err:
            Principal(tenant=too_long)
        assert err.value.field == "principal.tenant" and "longer than 100" in err.value.message


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=ascii_names, bad=refused_chars, where=st.integers(min_value=0))
def test_injected_characters_are_refused_naming_the_field(
    mem: Memory, acme: Principal, name: str, bad: str, where: int
) -> None:
    at = where % (len(name) + 1)
    value = name[:at] + bad + name[at:]
    before = snapshot(mem)
    attempts = [
        (lambda: Principal(tenant=value), "principal.tenant"),
        (lambda: Principal(tenant="acme", roles={"support", value}), "principal.roles"),
        (lambda: mem.add("a lesson", principal=acme, namespace=value), "namespace"),
        (lambda: mem.add("a lesson", principal=acme, roles=["support", value]), "roles"),
        (lambda: mem.recall("a situation", principal=acme, namespace=value), "namespace"),
    ]
    if bad != " " or at in (0, len(name)) or " " in (name[at - 1 : at] + name[at : at + 1]):
        attempts.append((lambda: Principal(tenant="acme", name=value), "principal.name"))
    for attempt, field in attempts:
        with pytest.raises(InvalidInput) as err:
            attempt()
        assert err.value.field == field
    assert snapshot(mem) == before


def test_skeleton_joins_lookalikes_and_keeps_different_names_apart() -> None:
    assert skeleton("acme") == skeleton("аcme") == skeleton("𝐚𝐜𝐦𝐞") == skeleton("ACME")
    assert skeleton("team-1") == skeleton("team-l")  # TR39: 1 and l print alike
    assert skeleton("acme") != skeleton("acne")
    assert skeleton("support") != skeleton("supports")


# -- look-alikes in a store -------------------------------------------------------------------


@st.composite
def lookalike_pairs(draw: st.DrawFn) -> tuple[str, str]:
    """A random ASCII name, and the same name with some characters swapped for look-alikes."""
    original = draw(ascii_names.filter(lambda n: any(c in LOOKALIKES for c in n)))
    chars = list(original)
    spots = [i for i, c in enumerate(chars) if c in LOOKALIKES]
    for i in draw(st.lists(st.sampled_from(spots), min_size=1, unique=True)):
        chars[i] = draw(st.sampled_from(LOOKALIKES[chars[i]]))
    return original, "".join(chars)


@settings(max_examples=25, deadline=None)
@given(pair=lookalike_pairs())
def test_lookalike_names_are_refused_when_the_original_exists(pair: tuple[str, str]) -> None:
    original, lookalike = pair
    folded = unicodedata.normalize("NFKC", lookalike)
    with fresh_memory() as mem:
        owner = Principal(tenant=original, roles={original})
        mem.add("the original's lesson", principal=owner, namespace=original, roles=[original])
        other = Principal(tenant=lookalike, roles={lookalike})
        same = Principal(tenant=original, roles={lookalike})
        attempts = [
            (lambda: mem.add("a look-alike's lesson", principal=other), "principal.tenant"),
            (lambda: mem.add("a look-alike's lesson", principal=owner, namespace=lookalike),
             "namespace"),
            (lambda: mem.add("a look-alike's lesson", principal=same, roles=[lookalike]),
             "roles"),
        ]
        for attempt, field in attempts:
            before = snapshot(mem)
            if folded == original:  # full-width or mathematical only: the very same name
                rec = attempt()
                assert (rec.scope.tenant, rec.scope.namespace) in (
                    (original, "default"), (original, original))
                assert rec.scope.roles <= {original}
                continue
            with pytest.raises(InvalidInput) as err:
                attempt()
            assert err.value.field == field
            assert snapshot(mem) == before  # no row, no ledger event, no name taken
            if field == "principal.tenant":  # another tenant's name is never shown
                assert repr(original) not in err.value.message


@settings(max_examples=25, deadline=None)
@given(pair=lookalike_pairs())
def test_lookalike_names_are_accepted_when_the_original_does_not_exist(
    pair: tuple[str, str],
) -> None:
    original, lookalike = pair
    folded = unicodedata.normalize("NFKC", lookalike)
    assume(folded != original)
    with fresh_memory() as mem:
        who = Principal(tenant=lookalike, roles={lookalike})
        rec = mem.add("a lesson", principal=who, namespace=lookalike, roles=[lookalike])
        assert (rec.scope.tenant, rec.scope.namespace, rec.scope.roles) == (
            folded, folded, frozenset({folded}))
        with pytest.raises(InvalidInput) as err:  # and now the original is the look-alike
            mem.add("a lesson", principal=Principal(tenant=original))
        assert err.value.field == "principal.tenant"


def test_tenant_refusal_does_not_name_the_other_tenant(mem: Memory) -> None:
    mem.add("a lesson", principal=Principal(tenant="globex-industries"))
    with pytest.raises(InvalidInput) as err:
        mem.add("a lesson", principal=Principal(tenant="gl\u043ebex-industries"))
    assert err.value.field == "principal.tenant"
    assert "globex" not in str(err.value) and "industries" not in str(err.value)


def test_the_same_name_in_another_scope_is_not_a_lookalike(mem: Memory) -> None:
    mem.add("a lesson", principal=Principal(tenant="acme", roles={"ops"}), namespace="ops",
            roles=["ops"])
    other = Principal(tenant="globex", roles={"\u043eps"})
    rec = mem.add("a lesson", principal=other, namespace="\u043eps", roles=["\u043eps"])
    assert rec.scope.namespace == "\u043eps"


# -- existing stores --------------------------------------------------------------------------


def _as_before_the_registry(path: Path) -> None:
    """Turn a store back into one written before m007_names."""
    mem = Memory(path, embedder="hash")
    db = mem.store.db
    with mem.store.transaction():
        db.execute("DROP TABLE names")
        db.execute("DELETE FROM meta WHERE key = 'name_skeletons'")
        db.execute("DELETE FROM _migrations WHERE name = 'm007_names'")
    mem.close()


def test_migration_fills_the_registry_and_keeps_colliding_names(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    mem = Memory(path, embedder="hash")
    acme = Principal(tenant="acme", roles={"ops"})
    mem.add("one", principal=acme, namespace="billing", roles=["ops"])
    second = mem.add("two", principal=acme, namespace="ledger")
    third = mem.add("three", principal=Principal(tenant="globex"))
    with mem.store.transaction():  # look-alikes the old rule let in
        mem.store.db.execute("UPDATE memories SET namespace = 'biIling' WHERE id = ?",
                             (second.id,))
        mem.store.db.execute("UPDATE memories SET tenant = '\u0430cme' WHERE id = ?",
                             (third.id,))
    mem.close()
    _as_before_the_registry(path)
    mem = Memory(path, embedder="hash")  # the migration runs, and does not fail
    names = set(mem.store.db.execute("SELECT kind, scope, name FROM names"))
    assert names == {
        ("tenant", "", "acme"), ("tenant", "", "\u0430cme"), ("role", "acme", "ops"),
        ("namespace", "acme", "billing"), ("namespace", "acme", "biIling"),
        ("namespace", "\u0430cme", "default"),
    }
    for tenant, namespace in (("acme", "billing"), ("acme", "biIling"), ("\u0430cme", "default")):
        mem.add(f"more in {namespace}", principal=Principal(tenant=tenant), namespace=namespace)
    with pytest.raises(InvalidInput) as err:  # a third look-alike is new: refused
        mem.add("four", principal=acme, namespace="bi1ling")
    assert err.value.field == "namespace"
    with pytest.raises(InvalidInput):
        mem.add("four", principal=Principal(tenant="acm\u0435"))
    mem.close()


def test_skeletons_are_recomputed_when_the_skeleton_release_changes(mem: Memory) -> None:
    mem.add("a lesson", principal=Principal(tenant="acme"))
    with mem.store.transaction():
        mem.store.db.execute("UPDATE names SET skeleton = 'stale'")
        mem.store.db.execute("UPDATE meta SET value = 'an older release' "
                             "WHERE key = 'name_skeletons'")
    with pytest.raises(InvalidInput):  # found by its recomputed skeleton
        mem.add("a lesson", principal=Principal(tenant="\u0430cme"))
    mem.add("another lesson", principal=Principal(tenant="acme"))  # commits the recomputation
    assert set(mem.store.db.execute("SELECT name, skeleton FROM names")) == {
        ("acme", skeleton("acme")), ("default", skeleton("default"))}
