"""The reader: situation and lesson text -> typed facts (`Reading`), compared then vs now.

One component reads what a text says, once per text; every stage of a recall and of a write
uses that reading. It knows English, not a domain (`lexicon`).
"""

from situated.reader import compare as _compare
from situated.reader import lexicon as _lexicon
from situated.reader.parse import read
from situated.reader.tokens import tokenize as _tokenize
from situated.reader.types import Fact, Reading


def clear_reader_caches() -> None:
    """Forget every text and word the reader has cached (erasure: no erased text stays)."""
    _compare._INDEXES.clear()
    for cached in (read, _tokenize, _lexicon.tags, _lexicon._parts, _lexicon.lemma,
                   _lexicon.unit, _lexicon.opposite, _lexicon.alike, _lexicon.same_thing,
                   _lexicon.forms):
        cached.cache_clear()


__all__ = ["Fact", "Reading", "clear_reader_caches", "read"]
