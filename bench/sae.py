"""Sparse autoencoder on MiniLM (issue 39 target: layer 4, F = 8 × d, k ≤ 32, trained in ≤ 10 min, held-out
fraction of variance explained ≥ 0.85, dead features < 10 %).

    python bench/sae.py [--corpus snli:train:20000] [--layer 4] [--features 3072] [--k 32] [--steps 0]
                        [--epochs 8] [--lr 1e-3] [--dump /tmp/sae-vectors.npz]

Times the vector pass (core.analyses.sparse_features.layer_vectors) and the training (train_sae, resumed from the
vectors this script wrote, so the pass is not run twice) separately. --dump writes the train / held-out vectors
for bench/sae_lens_trial.py (SAELens 6 on the same vectors).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core import settings as bertlens_settings  # noqa: E402
from core.analyses import sparse_features as sf  # noqa: E402
from core.data.corpus import resolve  # noqa: E402
from core.model.loading import load_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(bertlens_settings.data_dir() / "models" / "all-MiniLM-L6-v2"))
    parser.add_argument("--corpus", default="snli:train:20000")
    parser.add_argument("--layer", type=int, default=4)
    parser.add_argument("--features", type=int, default=3072)
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--epochs", type=float, default=8.0)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--name", default="bench-minilm-l4")
    parser.add_argument("--dump", default=None)
    parser.add_argument("--vectors", default=None,
                        help="train on the .npz a --dump wrote instead of encoding (timing beside sae_lens_trial.py)")
    args = parser.parse_args()

    lm = load_model(args.model)
    settings = sf.TrainSettings(features=args.features, k=args.k, batch=args.batch, steps=args.steps,
                                epochs=args.epochs, lr=args.lr)
    started = time.monotonic()
    if args.vectors:
        sentences, saved = [], np.load(args.vectors)
        train, held = saved["train"], saved["held"]
        args.corpus = args.vectors
    else:
        sentences = resolve(args.corpus).sentences
        train, held = sf.split_vectors(sf.layer_vectors(lm, sentences, args.layer), settings)
    encode_seconds = time.monotonic() - started
    if args.dump:
        np.savez(args.dump, train=train, held=held)
    sf.write_vectors(args.name, sf.run_fingerprint(lm.ref, args.layer, args.corpus, len(sentences), settings),
                     train, held)
    result = sf.train_sae(lm, sentences, args.layer, settings, args.name, corpus=args.corpus)
    print(json.dumps({"sentences": len(sentences), "train_tokens": len(train), "held_tokens": len(held),
                      "encode_seconds": round(encode_seconds, 1), "train_seconds": round(result.seconds, 1),
                      "steps": result.steps, **result.quality.to_json(), "path": result.path,
                      "loss_first_last": [result.losses[0], result.losses[-1]]}, indent=1))


if __name__ == "__main__":
    main()
