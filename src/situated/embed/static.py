"""The default embedder: a static (model2vec) model shipped inside the package.

A static model is one vector per token; a text's vector is the mean of its tokens' vectors.
The shipped model, `models/minilm-static-256/`, is distilled from all-MiniLM-L6-v2 by
`scripts/build_static_model.py`. Reading it needs numpy, `tokenizers` and `safetensors` only:
no torch, no network. Inference follows model2vec's `StaticModel.encode` step by step.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from situated.embed.base import Embedder, Vector
from situated.errors import ModelError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

_MODEL_DIR = Path(__file__).resolve().parent / "models" / "minilm-static-256"
_DEFAULT_MAX_LENGTH = 512  # model2vec's default when config.json has no max_length
SERIAL_TEXTS = 4
"""Batches this small (a recall's query and state, one `add`) are tokenised one text at a
time, outside the tokenizers thread pool (15-22 ms instead of 0.13 ms on a loaded machine)."""


def default_model_path() -> Path:
    """The folder of the shipped static model."""
    return _MODEL_DIR


def default_tokenizer_path() -> Path:
    """The `tokenizer.json` of the shipped static model (no truncation, no padding)."""
    return _MODEL_DIR / "tokenizer.json"


@dataclass
class _Model:
    """A loaded static model: everything `encode` needs."""

    tokenizer: Tokenizer
    vectors: npt.NDArray[np.floating[Any]]  # (rows, dim), as stored (float16 or float32)
    weights: npt.NDArray[np.float32] | None  # per token id, for vocabulary-quantized models
    mapping: npt.NDArray[np.int64] | None  # token id -> row of `vectors`
    unk_id: int | None
    max_length: int | None  # tokens kept per text
    _max_chars: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def cut(self, texts: Sequence[str]) -> Sequence[str]:
        """As model2vec: each text cut to `max_length` x (median token length) characters
        before tokenizing. The median needs the whole vocabulary (tens of ms), so it is read
        only when a text is longer than `max_length` characters, the shortest cut possible."""
        if self.max_length is None or all(len(t) <= self.max_length for t in texts):
            return texts
        with self._lock:
            if self._max_chars is None:
                tokens = sorted(self.tokenizer.get_vocab().items(), key=lambda item: item[1])
                median = int(np.median([len(token) for token, _ in tokens]))
                self._max_chars = self.max_length * median
        return [text[: self._max_chars] for text in texts]


_LOADED: dict[tuple[Path, int], _Model] = {}
_LOADED_LOCK = threading.Lock()


class StaticEmbedder(Embedder):
    """Mean of static token vectors, loaded on first use from a model2vec folder.

    Args:
        path: A model2vec folder (`model.safetensors`, `tokenizer.json`, `config.json`); by
            default the shipped minilm-static-256. Another folder is named
            `static:<folder name>`, so its vectors never pass for the shipped model's.
    """

    name = "minilm-static"
    version = "1"  # bump whenever the shipped model is rebuilt with different vectors
    dim = 256
    relevance_floor: float | None = 0.381
    """Measured by `scripts/calibrate_relevance.py` (95% of related LoCoMo pairs reach it, 38%
    of unrelated ones do); another model folder has none until measured."""
    copied_state_floor: float | None = 0.527
    """Measured the same way: 5.1% of unrelated LoCoMo pairs reach it, 63% of related ones."""

    def __init__(self, path: str | Path | None = None) -> None:
        if path is None:
            self.path = _MODEL_DIR
        else:
            self.path = Path(path)
            self.name = f"static:{self.path.name}"
            self.relevance_floor = None
            self.copied_state_floor = None
            self.dim = int(_read_config(self.path).get("hidden_dim", 0))
        self._model: _Model | None = None

    def embed_batch(self, texts: Sequence[str]) -> Vector:
        """Embed texts; a text without any known token gets the zero vector."""
        model = self._load()
        texts = model.cut(texts)
        if len(texts) <= SERIAL_TEXTS:  # a query: no thread pool (under load it costs ms)
            encodings = [model.tokenizer.encode(t, add_special_tokens=False) for t in texts]
        else:
            encodings = model.tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        ids = [
            [i for i in enc.ids if i != model.unk_id] if model.unk_id is not None else enc.ids
            for enc in encodings
        ]
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        lengths = np.array([len(row) for row in ids], dtype=np.int64)
        filled = np.flatnonzero(lengths)
        if filled.size == 0:
            return out
        total = int(lengths.sum())
        flat = np.fromiter((i for row in ids for i in row), dtype=np.int64, count=total)
        # rows to float32 after the lookup (exact, as float16 -> float32 is): the same numbers
        # as converting the whole table first, at a fraction of the cost for a short text
        rows = model.vectors[flat if model.mapping is None else model.mapping[flat]].astype(
            np.float32, copy=False
        )
        if model.weights is not None:
            rows = rows * model.weights[flat][:, None]
        starts = np.concatenate(([0], np.cumsum(lengths[filled])[:-1]))
        out[filled] = np.add.reduceat(rows, starts, axis=0) / lengths[filled][:, None]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out /= norms
        return out

    def _load(self) -> _Model:
        """The loaded model, read on first use and shared by every embedder of that folder."""
        if self._model is None:
            key = (self.path.resolve(), self.dim)
            with _LOADED_LOCK:
                if key not in _LOADED:
                    _LOADED[key] = _load_model(*key)
                self._model = _LOADED[key]
        return self._model


def _read_config(folder: Path) -> dict[str, Any]:
    """The folder's config.json as a dict."""
    path = folder / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read static model config {path}: {exc}") from exc
    if not isinstance(config, dict):
        raise ModelError(f"static model config {path} is not a JSON object")
    return config


def _load_model(folder: Path, dim: int) -> _Model:
    """Load a model2vec folder as model2vec's `StaticModel.from_pretrained` would."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    config = _read_config(folder)
    for name in ("model.safetensors", "tokenizer.json"):
        if not (folder / name).is_file():
            raise ModelError(f"static model file missing: {folder / name}")
    try:
        tensors = load_file(str(folder / "model.safetensors"))
    except (OSError, SafetensorError) as exc:
        raise ModelError(f"cannot read {folder / 'model.safetensors'}: {exc}") from exc
    try:
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as exc:  # tokenizers raises plain Exception for unreadable files
        raise ModelError(f"cannot read {folder / 'tokenizer.json'}: {exc}") from exc

    if "embeddings" not in tensors:
        raise ModelError(f"{folder / 'model.safetensors'} has no 'embeddings' tensor")
    vectors = tensors["embeddings"]
    if vectors.dtype not in (np.float16, np.float32):
        vectors = vectors.astype(np.float32)
    weights = tensors.get("weights")
    mapping = tensors.get("mapping")
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    if vectors.ndim != 2 or vectors.shape[1] != dim:
        raise ModelError(f"{folder} holds vectors of shape {vectors.shape}, expected (n, {dim})")
    if mapping is None and vectors.shape[0] != vocab_size:
        raise ModelError(
            f"{folder}: {vectors.shape[0]} vectors for a vocabulary of {vocab_size} tokens"
        )

    # As model2vec: no padding; truncation to max_length tokens, after cutting the text to
    # max_length * (median token length) characters.
    max_length = config.get("max_length", _DEFAULT_MAX_LENGTH)
    tokenizer.no_padding()
    if max_length is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(int(max_length))

    return _Model(
        tokenizer=tokenizer,
        vectors=vectors,
        weights=None if weights is None else np.asarray(weights, dtype=np.float32),
        mapping=None if mapping is None else np.asarray(mapping, dtype=np.int64),
        unk_id=_unk_id(tokenizer),
        max_length=None if max_length is None else int(max_length),
    )


def _unk_id(tokenizer: Tokenizer) -> int | None:
    """The id of the unknown token, dropped from every text (as model2vec does)."""
    model = tokenizer.model
    if hasattr(model, "unk_token"):  # WordPiece, BPE, WordLevel
        token = model.unk_token
        return None if token is None else tokenizer.token_to_id(token)
    unk = json.loads(tokenizer.to_str())["model"].get("unk_id")  # Unigram
    return None if unk is None else int(unk)
