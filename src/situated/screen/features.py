"""Features of one normalised text: hashed character and word n-grams plus the static embedding.

The same code featurises for training (`scripts/build_injection_model.py`) and for inference,
so the two cannot drift. Everything is deterministic: the n-gram hash is FNV-1a over code
points in unsigned 64-bit arithmetic (numpy), words are hashed with CRC-32, no Python `hash`.

- character n-grams, n = 2..5, over the lower-cased text padded with one space each side;
- word unigrams and bigrams (`\\w+` runs of the lower-cased text);
- each group is a binary presence vector scaled to unit length, hashed into `2**bits` buckets
  (a collision adds the two values);
- the 256-dimensional `minilm-static` embedding of the text (already unit length), multiplied
  by `embed_scale`.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from situated.embed.static import StaticEmbedder

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_MIX = np.uint64(0x9E3779B97F4A7C15)
_WORD = re.compile(r"\w+")
_DIGIT = re.compile(r"\d")
_ID = re.compile(r"(?<![\w-])(?=[\w-]*\d)(?=[\w-]*[^\W\d_])[\w-]{12,}(?![\w-])")


@dataclass(frozen=True)
class FeatureSpec:
    """How texts become features; stored with the model and checked when it loads."""

    bits: int = 18
    char_ngrams: tuple[int, ...] = (2, 3, 4, 5)
    word_ngrams: tuple[int, ...] = (1, 2)
    max_chars: int = 4000
    embed_scale: float = 1.0
    embedder: str = "minilm-static@1"
    fold_ids: bool = False
    """Every identifier-like token (12+ letters and digits, with both: a uuid, a hash, a key)
    read as `ID` before the digits are folded: random characters say nothing about intent,
    and model 2 held 5 of 20,000 texts like `lesson 3: 0e08b6ea5c1e...` on them. (Encoded
    payloads are still read: their decoded views are screened on their own.)"""
    fold_digits: bool = False
    """Every decimal digit read as `0` (by the n-grams and the embedding): a number's digits
    say nothing about intent, and a short text's few features must not hinge on them (model 1
    held 31 of 6,000 texts like `report case 1070`)."""

    @property
    def buckets(self) -> int:
        return 1 << self.bits

    def to_dict(self) -> dict[str, object]:
        return {
            "bits": self.bits, "char_ngrams": list(self.char_ngrams),
            "word_ngrams": list(self.word_ngrams), "max_chars": self.max_chars,
            "embed_scale": self.embed_scale, "embedder": self.embedder,
            "fold_digits": self.fold_digits, "fold_ids": self.fold_ids,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> FeatureSpec:
        def ints(key: str) -> tuple[int, ...]:
            value = data[key]
            if not isinstance(value, list):
                raise ValueError(f"feature spec {key} is not a list")
            return tuple(int(v) for v in value)

        return cls(
            bits=int(str(data["bits"])), char_ngrams=ints("char_ngrams"),
            word_ngrams=ints("word_ngrams"), max_chars=int(str(data["max_chars"])),
            embed_scale=float(str(data["embed_scale"])), embedder=str(data["embedder"]),
            fold_digits=bool(data.get("fold_digits", False)),
            fold_ids=bool(data.get("fold_ids", False)),
        )


@dataclass(frozen=True)
class Features:
    """Sparse hashed part (bucket indices, values) and dense embedding of one text."""

    indices: npt.NDArray[np.int64]
    values: npt.NDArray[np.float32]
    embedding: npt.NDArray[np.float32]


class Featuriser:
    """Turns normalised texts into `Features` under one `FeatureSpec`."""

    def __init__(self, spec: FeatureSpec, embedder: StaticEmbedder | None = None) -> None:
        self.spec = spec
        self.embedder = embedder or StaticEmbedder()
        shift = np.uint64(64 - spec.bits)
        self._shift = shift
        self._salts = {n: np.uint64((n * 0x51ED27) & 0xFFFFFFFF) for n in spec.char_ngrams}

    def hashed(self, text: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The hashed n-gram part: unique bucket indices and their values."""
        lowered = self._fold(text[: self.spec.max_chars]).lower()
        chars = self._char_buckets(lowered)
        words = self._word_buckets(lowered)
        parts_i: list[npt.NDArray[np.int64]] = []
        parts_v: list[npt.NDArray[np.float32]] = []
        for group in (chars, words):
            if group.size:
                parts_i.append(group)
                parts_v.append(np.full(group.size, 1.0 / np.sqrt(group.size), dtype=np.float32))
        if not parts_i:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        idx = np.concatenate(parts_i)
        val = np.concatenate(parts_v)
        uniq, inverse = np.unique(idx, return_inverse=True)
        summed = np.zeros(uniq.size, dtype=np.float32)
        np.add.at(summed, inverse, val)
        return uniq, summed

    def features(self, texts: list[str]) -> list[Features]:
        """Features of each text (one embedding batch for all)."""
        clipped = [self._fold(t[: self.spec.max_chars]) for t in texts]
        emb = self.embedder.embed_batch(clipped) * np.float32(self.spec.embed_scale)
        out = []
        for text, row in zip(clipped, emb, strict=True):
            idx, val = self.hashed(text)
            out.append(Features(idx, val, np.asarray(row, dtype=np.float32)))
        return out

    def _fold(self, text: str) -> str:
        if self.spec.fold_ids:
            text = _ID.sub("ID", text)
        return _DIGIT.sub("0", text) if self.spec.fold_digits else text

    def _char_buckets(self, text: str) -> npt.NDArray[np.int64]:
        padded = f" {text} "
        cps = np.frombuffer(padded.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        hashes = []
        with np.errstate(over="ignore"):
            for n in self.spec.char_ngrams:
                count = cps.size - n + 1
                if count <= 0:
                    continue
                h = np.full(count, _FNV_OFFSET ^ self._salts[n], dtype=np.uint64)
                for k in range(n):
                    h = (h ^ cps[k : k + count]) * _FNV_PRIME
                hashes.append(h)
            if not hashes:
                return np.zeros(0, dtype=np.int64)
            mixed = (np.concatenate(hashes) * _MIX) >> self._shift
        return np.unique(mixed.astype(np.int64))

    def _word_buckets(self, text: str) -> npt.NDArray[np.int64]:
        words = _WORD.findall(text)
        if not words:
            return np.zeros(0, dtype=np.int64)
        keys: list[int] = []
        for n in self.spec.word_ngrams:
            for i in range(len(words) - n + 1):
                gram = " ".join(words[i : i + n])
                keys.append(zlib.crc32(f"w{n}:{gram}".encode()))
        with np.errstate(over="ignore"):
            h = (np.asarray(keys, dtype=np.uint64) | np.uint64(1 << 40)) * _MIX
            mixed = h >> self._shift
        return np.unique(mixed.astype(np.int64))

    def hashed_scores(
        self, texts: list[str], weights: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float64]:
        """`weights . hashed(text)` for every text of `texts` (as passed to `features`), all
        at once: the same buckets and values as `hashed`, without its per-text arrays.

        A text's hashed part is a sum over its two groups (character and word n-grams) of
        the group's unique buckets, each at `1 / sqrt(size)`; a bucket two groups share adds
        both values, which is the same as weighting each group on its own."""
        clipped = [self._fold(t[: self.spec.max_chars]) for t in texts]
        lowered = [self._fold(t[: self.spec.max_chars]).lower() for t in clipped]
        out = np.zeros(len(texts), dtype=np.float64)
        for tid, buckets in (self._char_keys(lowered), self._word_keys(lowered)):
            if not tid.size:
                continue
            keys = np.sort((tid << np.int64(self.spec.bits)) | buckets)
            keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]  # unique, sorted
            owner = keys >> np.int64(self.spec.bits)
            picked = weights[keys & np.int64(self.spec.buckets - 1)].astype(np.float64)
            sums = np.bincount(owner, weights=picked, minlength=len(texts))
            sizes = np.bincount(owner, minlength=len(texts))
            filled = sizes > 0
            out[filled] += sums[filled] / np.sqrt(sizes[filled])
        return out

    def _char_keys(
        self, texts: list[str]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(text index, bucket) of every character n-gram of every text, as `_char_buckets`
        hashes them (n-grams never cross from one text into the next)."""
        padded = [f" {t} " for t in texts]
        cps = np.frombuffer("".join(padded).encode("utf-32-le"), dtype=np.uint32).astype(
            np.uint64
        )
        lengths = np.fromiter((len(p) for p in padded), dtype=np.int64, count=len(padded))
        starts = np.cumsum(lengths) - lengths
        owner = np.repeat(np.arange(len(padded), dtype=np.int64), lengths)
        offset = np.arange(cps.size, dtype=np.int64) - np.repeat(starts, lengths)
        tids, buckets = [], []
        with np.errstate(over="ignore"):
            for n in self.spec.char_ngrams:
                count = cps.size - n + 1
                if count <= 0:
                    continue
                h = np.full(count, _FNV_OFFSET ^ self._salts[n], dtype=np.uint64)
                for k in range(n):
                    h = (h ^ cps[k : k + count]) * _FNV_PRIME
                valid = offset[:count] + n <= lengths[owner[:count]]
                tids.append(owner[:count][valid])
                buckets.append(((h[valid] * _MIX) >> self._shift).astype(np.int64))
        if not tids:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(tids), np.concatenate(buckets)

    def _word_keys(
        self, texts: list[str]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(text index, bucket) of every word n-gram of every text, as `_word_buckets`."""
        tids: list[int] = []
        keys: list[int] = []
        crc = zlib.crc32
        for tid, text in enumerate(texts):
            words = _WORD.findall(text)
            for n in self.spec.word_ngrams:
                grams = (
                    words if n == 1 else [" ".join(words[i : i + n])
                                          for i in range(len(words) - n + 1)]
                )
                keys.extend(crc(f"w{n}:{g}".encode()) for g in grams)
                tids.extend([tid] * len(grams))
        if not keys:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        with np.errstate(over="ignore"):
            h = (np.asarray(keys, dtype=np.uint64) | np.uint64(1 << 40)) * _MIX
            buckets = (h >> self._shift).astype(np.int64)
        return np.asarray(tids, dtype=np.int64), buckets
