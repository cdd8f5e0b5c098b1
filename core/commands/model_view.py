"""`model-view`: the attention page's model view (every head as a block-max pooled thumbnail) on the command line."""

from __future__ import annotations

from pathlib import Path

from core import numbering
from core import files, validation
from core.analyses.model_view import DEFAULT_PIXELS, MAX_PIXELS, SCALES, model_view
from core.charts.attention import model_view_grid
from core.charts.export import chart_png
from core.commands import add_json_arguments, add_model_argument, warn_truncated
from core.model.encoding import encode
from core.model.loading import load_model

# The command line's spelling of core.analyses.attention.PAIR_FILTERS (no arrow to type).
SPELLED_FILTERS = {"all": "all", "a-b": "A→B", "b-a": "B→A", "a-a": "A→A", "b-b": "B→B"}


def register(subparsers) -> None:
    p = subparsers.add_parser("model-view", help="every layer × head as a thumbnail: each pixel the largest attention "
                                                 "weight of the cells it covers (the attention page's model view)")
    add_model_argument(p)
    p.add_argument("--text", required=True)
    p.add_argument("--text-b", default=None, help="a second sentence (pair input)")
    p.add_argument("--pair-filter", choices=list(SPELLED_FILTERS), default="all",
                   help="a-b: rows of sentence A, columns of sentence B (needs --text-b); default all")
    p.add_argument("--pixels", type=validation.positive, default=DEFAULT_PIXELS,
                   help=f"side of each thumbnail in pixels, 1 to {MAX_PIXELS} (default {DEFAULT_PIXELS})")
    p.add_argument("--scale", choices=SCALES, default="head",
                   help="head: each thumbnail darkest at its own maximum; shared: one maximum over all heads")
    p.add_argument("--png", type=validation.output_file, default=None, metavar="FILE",
                   help="also write the grid as a PNG image")
    add_json_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    validation.check_count(args.pixels, "--pixels", minimum=1, maximum=MAX_PIXELS)  # before the model loads
    pair_filter = SPELLED_FILTERS[args.pair_filter]
    if pair_filter != "all" and not args.text_b:
        raise ValueError(f"--pair-filter {args.pair_filter} needs a sentence pair: give --text-b")
    lm = load_model(args.model)
    encoding = encode(lm, (args.text, args.text_b) if args.text_b else args.text)
    truncated = warn_truncated([encoding])
    view = model_view(encoding.attentions, encoding.tokens, encoding.segment_ids, pixels=args.pixels,
                      scale=args.scale, pair_filter=pair_filter)
    if args.png:
        files.write_bytes_atomic(Path(args.png), chart_png(model_view_grid(view)))
    if args.json:
        validation.dump_json({**view.to_json(), "truncated": truncated}, args.out)
        return 0
    print(f"{lm.ref}: {len(view.tokens)} tokens, {view.pixels}×{view.pixels} px thumbnails, scale {view.scale}, "
          f"filter {view.pair_filter}; per head: darkest weight, top keys by mean attention received")
    for layer in range(view.thumbnails.shape[0]):
        for head in range(view.thumbnails.shape[1]):
            print(f"{numbering.head_name(layer, head)}\t{view.scale_max[layer, head]:.3f}\t{view.top_keys_text(layer, head)}")
    return 0
