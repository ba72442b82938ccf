"""The embedder contract: implement `embed_batch`; the base class does the rest."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension.

    Subclasses set `name`, `version` and `dim` and implement `embed_batch`. The pair
    (`model_ref`) is stored with every vector, and a store refuses vectors of another model.
    """

    name: str = ""
    version: str = ""
    dim: int = 0
    batch_size: int = 64
    relevance_floor: float | None = None
    """The content similarity (query to memory content) under which a memory with no
    situation to compare (a note, preference or fact, or a lesson without a source state) is
    not relevant to the present: measured per embedder on real text by
    `scripts/calibrate_relevance.py` (the built-ins set theirs); None: no floor."""

    copied_state_floor: float | None = None
    """The stricter content similarity a situated lesson needs when its source state is the
    present itself (then/now similarity `prechecks.COPIED_STATE` or more): a copied situation
    vouches for nothing, so the content alone must be about the present. Measured like
    `relevance_floor` (`scripts/calibrate_relevance.py`, the floor 5% of unrelated pairs
    reach); None: the ordinary floor."""
    reads_meaning: bool = True
    """Whether similarity reflects what texts are about, not only the words they share: then
    a situated lesson's content is judged for relevance too (a source state copied from the
    present does not make unrelated content relevant). The hash embedder shares words only."""

    @property
    def model_ref(self) -> str:
        """`name@version:dim`, the identity stored with every vector."""
        return f"{self.name}@{self.version}:{self.dim}"

    @abstractmethod
    def embed_batch(self, texts: Sequence[str]) -> Vector:
        """Embed up to `batch_size` texts; returns an array of shape (len(texts), dim)."""

    def embed(self, texts: Iterable[str]) -> Vector:
        """Embed any number of texts in batches; rows are L2-normalised."""
        items = list(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            self.embed_batch(items[i : i + self.batch_size])
            for i in range(0, len(items), self.batch_size)
        ]
        out = np.asarray(np.vstack(parts), dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out /= norms
        return out

    def embed_one(self, text: str) -> Vector:
        """Embed a single text; returns a vector of shape (dim,)."""
        vector: Vector = self.embed([text])[0]
        return vector
