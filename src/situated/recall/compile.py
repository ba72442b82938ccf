"""Stage 7, compile: choose what to serve under a token budget and render it with provenance.

Selection is an exact 0/1 knapsack maximising the sum of expected utility subject to the token
budget (dynamic programming over token counts, vectorised with numpy). Tokens are counted with
the `tokenizers` library on the tokenizer shipped with the default embedding model; if that file
cannot be loaded, a documented fallback estimates ceil(1.3 x words + punctuation).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

_WORDS = re.compile(r"\w+|[^\w\s]")
ESTIMATE_VERSION = 1
"""Bump when `estimate_tokens` changes."""


class TokenCounter:
    """Counts tokens with a real tokenizer, or estimates them if none can be loaded."""

    def __init__(self) -> None:
        self._tok: object | None = None
        self.name = "estimate"
        self.ref = f"estimate:{ESTIMATE_VERSION}"
        """The name and what pins its counts (the tokenizer file's digest; the estimate's
        version): counts stored under another ref are not reused."""
        try:
            from tokenizers import Tokenizer

            from situated.embed.static import default_tokenizer_path

            path = default_tokenizer_path()
            self._tok = Tokenizer.from_file(str(path))
            self._tok.no_truncation()
            self.name = "tokenizers:minilm"
            digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
            self.ref = f"{self.name}:{digest}"
        except (ImportError, OSError, ValueError, Exception):
            # any failure to load the tokenizer file falls back to the documented estimate
            self._tok = None
            self.name, self.ref = "estimate", f"estimate:{ESTIMATE_VERSION}"

    def count(self, text: str) -> int:
        """Tokens in `text` (cached: the same guidance lines recur across recalls)."""
        return self._count(text)

    @lru_cache(maxsize=16384)  # noqa: B019 - one process-wide counter, never collected
    def _count(self, text: str) -> int:
        if self._tok is not None:
            return len(self._tok.encode(text, add_special_tokens=False).ids)  # type: ignore[attr-defined]
        return estimate_tokens(text)


def estimate_tokens(text: str) -> int:
    """Fallback: about 1.3 tokens per word-or-punctuation unit."""
    return math.ceil(1.3 * len(_WORDS.findall(text)))


@lru_cache(maxsize=1)
def token_counter() -> TokenCounter:
    return TokenCounter()


def render_line(guidance: str, memory_id: str) -> str:
    """One guidance line as served: the text, then the memory id to cite."""
    return f"{guidance} [{memory_id}]"


def knapsack(weights: Sequence[int], values: Sequence[float], capacity: int) -> list[int]:
    """Indices of the subset with maximal total value whose total weight fits `capacity`."""
    n = len(weights)
    if n == 0 or capacity <= 0:
        return []
    if sum(weights) <= capacity:
        return [i for i in range(n) if values[i] > 0]
    cap = int(capacity)
    dp = np.zeros(cap + 1, dtype=np.float64)
    keep = np.zeros((n, cap + 1), dtype=bool)
    for i, (w, v) in enumerate(zip(weights, values, strict=True)):
        if w > cap or v <= 0:
            continue
        candidate = np.full(cap + 1, -np.inf)
        candidate[w:] = dp[: cap + 1 - w] + v
        better = candidate > dp + 1e-12
        keep[i] = better
        dp = np.where(better, candidate, dp)
    chosen = []
    c = int(np.argmax(dp))
    for i in range(n - 1, -1, -1):
        if keep[i, c]:
            chosen.append(i)
            c -= int(weights[i])
    return sorted(chosen)
