"""`pca`: token vectors of every layer in 2-D (the Layerwise PCA page's twin)."""

from __future__ import annotations

import json

import numpy as np

from core.encoding import encode
from core.models import load_model
from core.projection import BACKGROUNDS, METHODS, background_vectors, background_sentences, collect_tokens, layerwise_projection


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "pca",
        help="project every layer's token vectors to 2-D (joint PCA, per-layer PCA or t-SNE)",
        description="By default every word piece is kept, special tokens included, so the output lines up with "
        "the tokenizer's tokens; --drop-special and --drop-punct leave those out of the fit and the output.",
    )
    p.add_argument("--model", default=None, help="hub id, local folder or run name (default: BERTLENS_MODEL)")
    p.add_argument("--text", action="append", required=True, help="a sentence; repeat for several")
    p.add_argument("--fit", choices=METHODS, default="joint", help="joint: one PCA over all layers (default)")
    p.add_argument("--background", choices=BACKGROUNDS, default=None, help="fit PCA on this corpus instead")
    p.add_argument("--background-size", type=int, default=100, help="SNLI pairs in the background (default 100)")
    p.add_argument("--drop-special", action="store_true", help="leave out [CLS], [SEP] ...")
    p.add_argument("--drop-punct", action="store_true", help="leave out punctuation pieces")
    p.add_argument("--seed", type=int, default=0, help="t-SNE seed (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run_pca)


def run_pca(args) -> int:
    lm = load_model(args.model)
    keep = {"keep_special": not args.drop_special, "keep_punct": not args.drop_punct}
    tokens = collect_tokens(encode(lm, list(args.text), attentions=False), **keep)
    background = None
    if args.background:
        sentences = background_sentences(args.background, limit=args.background_size)
        background = background_vectors(lm, sentences, **keep)
    projection = layerwise_projection(tokens, args.fit, background=background, seed=args.seed)
    ratio = projection.explained_variance_ratio
    if args.json:
        result = {
            "model": lm.ref,
            "fit": projection.method,
            "background": args.background,
            "n_fit": projection.n_fit,
            "tokens": list(projection.tokens),
            "sentence": projection.sentence.tolist(),
            "position": projection.position.tolist(),
            "segment": projection.segment.tolist(),
            "layers": projection.layers.tolist(),
            "coords": projection.coords.tolist(),
            "explained_variance_ratio": [[None if np.isnan(v) else float(v) for v in row] for row in ratio],
        }
        if projection.joint_explained_variance_ratio is not None:
            result["joint_explained_variance_ratio"] = projection.joint_explained_variance_ratio.tolist()
        print(json.dumps(result))
        return 0
    print(f"{len(projection.tokens)} tokens, {len(projection.layers)} layers (0 = embeddings), fit: {projection.method}")
    if projection.method != "tsne":
        print("layer\tPC1\tPC2\t(share of the layer's variance on the 2 axes)")
        for layer, (a, b) in zip(projection.layers, ratio):
            print(f"{layer}\t{a:.3f}\t{b:.3f}")
    last = projection.layers[-1]
    print(f"coordinates at layer {last}:")
    for label, (x, y) in zip(projection.labels, projection.coords[last]):
        print(f"{label}\t{x:.3f}\t{y:.3f}")
    return 0
