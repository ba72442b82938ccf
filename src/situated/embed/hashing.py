"""A deterministic, offline embedder made of hashed word and character-trigram features."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from hashlib import blake2b

import numpy as np

from situated.embed.base import Embedder, Vector
from situated.errors import InvalidInput

_WORD = re.compile(r"\w+")
# Without document frequencies, the commonest English words would dominate every cosine:
# they keep a fifth of a word's weight.
_STOP_WORDS = frozenset(
    "a about all also am an and any are as at be been but by can could did do does for from had "
    "has have he her his how i if in into is it its me my no not of on or our she so than that "
    "the their them then there these they this to too up us was we were what when which who "
    "will with would you your".split()
)
_STOP_WEIGHT = 0.2


@lru_cache(maxsize=1 << 16)
def feature_bucket(feature: str, dim: int) -> tuple[int, float]:
    """The (bucket, sign) of a feature: stable across processes and platforms."""
    digest = int.from_bytes(blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    return digest % dim, 1.0 if (digest >> 63) & 1 else -1.0


def _features(text: str) -> dict[str, float]:
    """Weighted features of a text: lowercase words and the trigrams of each padded word.

    A word weighs 1 + ln(count), sublinear so that one word said five times does not drown the
    rest (a fifth of that for stop words). Its n trigrams weigh that over sqrt(n) each, so they
    have the word's norm between them: exact words count most, and trigrams add credit for shared
    stems, inflections and typos.
    """
    words = Counter(_WORD.findall(text.lower()))
    features: dict[str, float] = {}
    for word, count in words.items():
        weight = (1.0 + math.log(count)) * (_STOP_WEIGHT if word in _STOP_WORDS else 1.0)
        features["w:" + word] = weight
        padded = f"<{word}>"
        trigrams = [padded[i : i + 3] for i in range(len(padded) - 2)]
        for trigram in trigrams:
            key = "t:" + trigram
            features[key] = features.get(key, 0.0) + weight / math.sqrt(len(trigrams))
    return features


class HashEmbedder(Embedder):
    """Feature hashing of words and character trigrams into `dim` signed buckets.

    Meant for tests and for a machine without any model: no dependency beyond numpy, the same
    vectors on every run and platform, similar wording gets a high cosine and unrelated text
    a low one. It captures shared words, not meaning.

    Args:
        dim: Number of buckets, the dimension of the vectors.
    """

    name = "hash"
    version = "1"
    reads_meaning = False

    def __init__(self, dim: int = 256) -> None:
        if dim < 2:
            raise InvalidInput("dim", f"must be at least 2, got {dim}")
        self.dim = dim
        # measured at 256 buckets (`scripts/calibrate_relevance.py`: 95% of related LoCoMo
        # pairs reach it, 31% of unrelated ones do); fewer buckets collide more
        self.relevance_floor = 0.094 if dim == 256 else None

    def embed_batch(self, texts: Sequence[str]) -> Vector:
        """Embed texts; a text without any word gets the zero vector."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in _features(text).items():
                bucket, sign = feature_bucket(feature, self.dim)
                out[row, bucket] += sign * weight
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out /= norms
        return out
