"""Build the reader's word relations (`src/situated/reader/data/lexicon.msgpack`) from WordNet.

The situation reader (`situated.reader`) knows no domain. What it knows about words comes from
two general resources of English: LemmInflect (lemmas and parts of speech, a dependency) and
WordNet 3.0 (Princeton University; licence below), from which this script derives, for the
most frequent senses of each word:

- adjectives: their synsets (soggy and waterlogged share one), the cluster each sense belongs
  to (a head adjective and its satellites, "wet": soggy, damp, ...) and which clusters are
  antonyms of which ("wet" / "dry");
- verbs and adverbs: their synsets and their direct antonyms ("open" / "close");
- nouns: their synsets, so that "washer" and "washing machine" are one thing;
- verbs: the lexicographer file of each of their most frequent senses (motion, change,
  stative, ...), so that the reader knows "relocate to Austin" moves its subject and "talk to
  Sam" does not.

Run it where WordNet's database files are installed (Debian: `apt-get install wordnet-base`,
files in /usr/share/wordnet), then commit the output:

    python scripts/build_lexicon.py [--wordnet /usr/share/wordnet]

WordNet 3.0 licence: "Permission to use, copy, modify and distribute this software and
database and its documentation for any purpose and without fee or royalty is hereby granted,
provided that you agree to comply with the following copyright notice and statements,
including the disclaimer, and that the same appear on ALL copies of the software, database
and documentation, including modifications that you make for internal use or for
distribution. WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved."
The notice ships beside the table (`reader/data/WORDNET_LICENSE`).
"""

from __future__ import annotations

import argparse
import shutil
from collections import defaultdict
from pathlib import Path

import msgspec

OUT = Path(__file__).resolve().parents[1] / "src" / "situated" / "reader" / "data"
SENSES = {"a": 4, "v": 4, "n": 3, "r": 3}
"""How many of a word's most frequent senses count (WordNet orders senses by frequency)."""


def parse_index(path: Path, pos: str) -> dict[str, list[int]]:
    """lemma -> synset offsets of its most frequent senses."""
    out: dict[str, list[int]] = {}
    for line in path.read_text(encoding="latin-1").splitlines():
        if line.startswith(" "):
            continue
        parts = line.split()
        lemma, n_synsets, n_ptrs = parts[0], int(parts[2]), int(parts[3])
        offsets = parts[6 + n_ptrs: 6 + n_ptrs + n_synsets]
        out[lemma.lower()] = [int(o) for o in offsets[: SENSES[pos]]]
    return out


def parse_data(path: Path) -> dict[int, tuple[str, list[str], list[tuple[str, int, str, str]]]]:
    """offset -> (ss_type, words, pointers (symbol, offset, pos, source/target))."""
    out = {}
    for line in path.read_text(encoding="latin-1").splitlines():
        if line.startswith(" "):
            continue
        head = line.split(" | ")[0].split()
        offset, ss_type, w_cnt = int(head[0]), head[2], int(head[3], 16)
        words = [head[4 + 2 * i].lower() for i in range(w_cnt)]
        i = 4 + 2 * w_cnt
        p_cnt = int(head[i])
        ptrs = [(head[i + 1 + 4 * j], int(head[i + 2 + 4 * j]), head[i + 3 + 4 * j],
                 head[i + 4 + 4 * j]) for j in range(p_cnt)]
        out[offset] = (ss_type, words, ptrs)
    return out


def lexicographer_files(path: Path) -> dict[int, int]:
    """offset -> the lexicographer file its synset is in (38: verb.motion, 30: verb.change)."""
    return {int(p[0]): int(p[1]) for p in (
        line.split(maxsplit=2) for line in path.read_text(encoding="latin-1").splitlines()
        if not line.startswith(" "))}


def clean(word: str) -> str:
    """WordNet's form of a word: underscores for spaces, `(a)`/`(p)` markers dropped."""
    return word.split("(")[0].replace("_", " ")


def build(wordnet: Path) -> dict[str, object]:
    adj_index = parse_index(wordnet / "index.adj", "a")
    adj = parse_data(wordnet / "data.adj")
    verb_index = parse_index(wordnet / "index.verb", "v")
    verb = parse_data(wordnet / "data.verb")
    adv_index = parse_index(wordnet / "index.adv", "r")
    adv = parse_data(wordnet / "data.adv")
    noun_index = parse_index(wordnet / "index.noun", "n")
    verb_files = lexicographer_files(wordnet / "data.verb")

    def cluster(offset: int) -> int:
        ss_type, _, ptrs = adj[offset]
        if ss_type == "s":
            for sym, target, pos, _ in ptrs:
                if sym == "&" and pos == "a":
                    return target
        return offset

    adjectives = {clean(w): sorted({cluster(o) for o in offs}) for w, offs in adj_index.items()}
    antonyms: dict[int, set[int]] = defaultdict(set)
    for offset, (_, _, ptrs) in adj.items():
        for sym, target, pos, _ in ptrs:
            if sym == "!" and pos in "as":
                antonyms[cluster(offset)].add(cluster(target))

    def lexical_antonyms(
        index: dict[str, list[int]],
        data: dict[int, tuple[str, list[str], list[tuple[str, int, str, str]]]],
    ) -> dict[str, list[str]]:
        out: dict[str, set[str]] = defaultdict(set)
        for word, offsets in index.items():
            for offset in offsets:
                _, words, ptrs = data[offset]
                for sym, target, _pos, st in ptrs:
                    if sym != "!":
                        continue
                    source, dest = int(st[:2], 16), int(st[2:], 16)
                    if source and clean(words[source - 1]) != clean(word):
                        continue
                    target_words = data[target][1]
                    names = [target_words[dest - 1]] if dest else target_words
                    out[clean(word)].update(clean(n) for n in names)
        return {k: sorted(v) for k, v in out.items()}

    return {
        "version": 1,
        "adjective_clusters": adjectives,
        "adjective_synsets": {clean(w): offs for w, offs in adj_index.items()},
        "adjective_antonyms": {str(k): sorted(v) for k, v in antonyms.items()},
        "verbs": {clean(w): o for w, o in verb_index.items()},
        "verb_antonyms": lexical_antonyms(verb_index, verb),
        "adverb_antonyms": lexical_antonyms(adv_index, adv),
        "nouns": {clean(w): o for w, o in noun_index.items()},
        "verb_files": {clean(w): [verb_files[o] for o in offs] for w, offs in verb_index.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"))
    args = parser.parse_args()
    table = build(args.wordnet)
    OUT.mkdir(parents=True, exist_ok=True)
    data = msgspec.msgpack.encode(table)
    (OUT / "lexicon.msgpack").write_bytes(data)
    licence = Path("/usr/share/doc/wordnet-base/copyright")
    if licence.exists():
        shutil.copyfile(licence, OUT / "WORDNET_LICENSE")
    sizes = {k: len(v) for k, v in table.items() if isinstance(v, dict)}
    print(f"wrote {OUT / 'lexicon.msgpack'} ({len(data) / 1e6:.1f} MB): {sizes}")


if __name__ == "__main__":
    main()
