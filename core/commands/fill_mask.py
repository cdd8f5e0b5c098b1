"""`fill-mask`: the model's guesses for each [MASK], layer by layer (the Masked words page's twin)."""

from __future__ import annotations

from core import validation
from core.model.encoding import read_input
from core.commands import add_json_arguments, add_settings_arguments, settings_from_args, warn, warn_truncated
from core.model.artefacts import head_warning
from core.analyses.masked import FILL_MASK as ANALYSIS, fill_mask, normalise_masks

from core.model.loading import load_model


def register(subparsers) -> None:
    p = subparsers.add_parser(
        ANALYSIS.command,
        help=ANALYSIS.summary,
        description="Write [MASK] (or <mask>, any case: it becomes the model's own mask token) where a word should "
        "be guessed. The last layer listed is the model's own output; earlier layers are the same head applied to "
        "that layer's hidden state (a probe: those layers were not trained to feed the head).",
    )
    p.add_argument("--model", default=None, help="hub id, local folder or run name with an MLM head (default: BERTLENS_MODEL)")
    p.add_argument("--text", required=True, help='a sentence with [MASK], e.g. "The [MASK] raised rates."')
    p.add_argument("--text-b", default=None, help="an optional second sentence (a pair)")
    add_settings_arguments(p, ANALYSIS, skip=("layers",))
    # Its spelling is checked before the model loads (validation.layer_list), its range once the depth is known.
    layers = ANALYSIS.field("layers")
    p.add_argument("--layers", dest="layers", default=layers.default, type=validation.layer_list,
                   help=f"{layers.meta.help} (default {layers.default})")
    add_json_arguments(p)
    p.set_defaults(func=run_fill_mask)


def run_fill_mask(args) -> int:
    lm = load_model(args.model, masked_lm=True)
    warn(head_warning(lm.path))  # a fitted head under 1.5× the best constant guess, on stderr (the JSON is unchanged)
    settings = settings_from_args(ANALYSIS, args)
    result = fill_mask(lm, args.text, args.text_b, top_k=settings.top_k, layers=settings.layers)
    mask = lm.tokenizer.mask_token  # counted on the text as fill_mask reads it, every mask spelling made [MASK]
    truncated = warn_truncated(read_input(lm, normalise_masks(args.text, mask),
                                                     normalise_masks(args.text_b, mask) if args.text_b else None))
    if args.json:
        validation.dump_json({**result.to_json(), "truncated": truncated}, args.out)
        return 0
    print(" ".join(result.tokens))
    last = result.layers[-1]
    for m, position in enumerate(result.positions):
        print(f"\nmask at token {position}: layer {last} is the model's output; earlier layers are a probe")
        print("layer\t" + "\t".join(f"#{r + 1}" for r in range(result.top_ids.shape[-1])))
        for n, layer in enumerate(result.layers):
            cells = [f"{t} {p:.3f}" for t, p in zip(result.top_tokens[m][n], result.top_probabilities[m, n])]
            print(f"{layer}\t" + "\t".join(cells))
    return 0
