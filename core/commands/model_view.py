"""`head-view` and `model-view`: the attention page's "One sentence" tab on the command line (one layer's heads as
lines between tokens; every head as a block-max pooled thumbnail). Their options are made from the declarations
(core.analyses.attention / core.analyses.model_view ANALYSIS): `--pair-filter` takes a-b and A→B alike."""

from __future__ import annotations

from pathlib import Path

from core import numbering
from core import files, validation
from core.analyses import attention, model_view
from core.charts.attention import attention_heatmap, head_view_lines, model_view_grid
from core.charts.export import chart_png
from core.commands import add_json_arguments, add_model_argument, add_settings_arguments, settings_from_args, warn_truncated
from core.model.encoding import encode
from core.model.loading import load_model

STYLES = ("lines", "heatmap")


def _inputs(p) -> None:
    add_model_argument(p)
    p.add_argument("--text", required=True)
    p.add_argument("--text-b", default=None, help="a second sentence (pair input)")


def register(subparsers) -> None:
    p = subparsers.add_parser(attention.ANALYSIS.command, help=attention.ANALYSIS.summary)
    _inputs(p)
    add_settings_arguments(p, attention.ANALYSIS)
    p.add_argument("--png", type=validation.output_file, default=None, metavar="FILE",
                   help="also write the chart as a PNG image")
    p.add_argument("--style", choices=STYLES, default="lines", help="the PNG's drawing: lines (default) or heatmap")
    add_json_arguments(p, "one JSON object: layer (1..L), heads, pair_filter, hide_special, word_level, queries, "
                          "keys, weights [query][key]")
    p.set_defaults(func=run_head_view)

    p = subparsers.add_parser(model_view.ANALYSIS.command, help=model_view.ANALYSIS.summary)
    _inputs(p)
    add_settings_arguments(p, model_view.ANALYSIS)
    p.add_argument("--png", type=validation.output_file, default=None, metavar="FILE",
                   help="also write the grid as a PNG image")
    add_json_arguments(p)
    p.set_defaults(func=run)


def _encoding(args, pair_filter: str):
    """The input's encoding (and the JSON's "truncated"); a pair filter without --text-b is refused before the model
    loads."""
    if pair_filter != "all" and not args.text_b:
        raise ValueError(f"--pair-filter {pair_filter} needs a sentence pair: give --text-b")
    lm = load_model(args.model)
    encoding = encode(lm, (args.text, args.text_b) if args.text_b else args.text)
    return lm, encoding, warn_truncated([encoding])


def run_head_view(args) -> int:
    settings = settings_from_args(attention.ANALYSIS, args)
    lm, encoding, truncated = _encoding(args, settings.pair_filter)
    view = attention.head_view_of(encoding, settings)
    if args.png:
        draw = head_view_lines if args.style == "lines" else attention_heatmap
        files.write_bytes_atomic(Path(args.png), chart_png(draw(view, view.title)))
    if args.json:
        validation.dump_json({**view.to_json(), "truncated": truncated}, args.out)
        return 0
    notes = [f"filter {view.pair_filter}"] + (["special tokens hidden"] if view.renormalised else []) + \
        (["whole words"] if view.word_level else [])
    print(f"{lm.ref}: {view.title} ({'; '.join(notes)}); per query: its three strongest keys")
    for row, query in enumerate(view.query_labels):
        top = sorted(range(len(view.key_labels)), key=lambda k: -view.weights[row, k])[:3]
        print(f"{query}\t" + ", ".join(f"{view.key_labels[k]} {view.weights[row, k]:.3f}" for k in top))
    return 0


def run(args) -> int:
    settings = settings_from_args(model_view.ANALYSIS, args)
    lm, encoding, truncated = _encoding(args, settings.pair_filter)
    view = model_view.model_view_of(encoding, settings)
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
