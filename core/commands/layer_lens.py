"""`lens` and `fit-tuned-lens`: every layer read in words through the MLM head (the Read the layers page's Lens tab)."""

from __future__ import annotations

from core import validation
from core.analyses import logit_lens as lenses
from core.commands import (add_json_arguments, add_model_argument, add_settings_arguments, settings_from_args,
                           stderr_progress, warn, warn_truncated)
from core.data import corpus as corpora
from core.model.encoding import read_input
from core.model.artefacts import head_warning
from core.model.loading import load_model


def register(subparsers) -> None:
    p = subparsers.add_parser(
        lenses.LENS.command,
        help=lenses.LENS.summary,
        description="Layer 0 is the embeddings, the last layer the model's own output. kl_to_final is KL(final "
        "layer's distribution || the lens's) in nats, averaged over the non-special tokens. A model without an "
        "MLM head needs one fitted first (python -m core fit-mlm-head).",
    )
    add_model_argument(p)
    p.add_argument("--text", required=True, help="the sentence to read")
    p.add_argument("--text-b", default=None, help="an optional second sentence (a pair)")
    add_settings_arguments(p, lenses.LENS)  # --kind, --top-k
    p.add_argument("--lens", default=None, help="a tuned lens's name (see python -m core models) or folder")
    add_json_arguments(p)
    p.set_defaults(func=run_lens)

    f = subparsers.add_parser(
        lenses.FIT_TUNED_LENS.command,
        help=lenses.FIT_TUNED_LENS.summary,
        description="The model stays frozen; the translators minimise KL(final || lens) over the corpus's tokens "
        "(the last tenth of the sentences is held out and scored for both lenses). Saved as "
        "models_cache/lenses/NAME/lens.safetensors (layers.{l}.weight, layers.{l}.bias) + config.json.",
    )
    add_model_argument(f)
    f.add_argument("--corpus", required=True, help=corpora.CLI_HELP)
    f.add_argument("--limit", type=validation.positive, default=None, help="the first N sentences of --corpus only")
    f.add_argument("--out", dest="name", required=True, metavar="NAME", help="the lens's name (its folder)")
    add_settings_arguments(f, lenses.FIT_TUNED_LENS)  # --steps, --batch-tokens, --seed
    f.add_argument("--overwrite", action="store_true",
                   help="replace a saved lens of that name (kept until the new one is saved); without it the name is refused")
    add_json_arguments(f, "one JSON object: name, path, held-out KL per layer of both lenses")
    f.set_defaults(func=run_fit_tuned_lens)


def run_lens(args) -> int:
    lm = load_model(args.model, masked_lm=True)
    warn(head_warning(lm.path))  # a fitted head under 1.5× the best constant guess, on stderr
    result = lenses.run_lens(lm, (args.text, args.text_b, args.lens), settings_from_args(lenses.LENS, args))
    warn_truncated(read_input(lm, args.text, args.text_b))  # on stderr: the JSON's keys are the issue's, exactly
    if args.json:
        validation.dump_json(result.to_json(), args.out)
        return 0
    what = f"tuned lens '{result.lens}'" if result.kind == "tuned" else "logit lens"
    print(f"{what}: top-1 guess per layer (rows) and token (columns); last layer = the model's output")
    print("layer\tKL\t" + "\t".join(result.tokens))
    for n, layer in enumerate(result.layers):
        cells = [f"{result.top_tokens[n][i][0]} {result.top_probabilities[n, i, 0]:.2f}" for i in range(len(result.tokens))]
        print(f"{layer}\t{result.kl_to_final[n]:.3f}\t" + "\t".join(cells))
    return 0


def run_fit_tuned_lens(args) -> int:
    lenses.check_free_name(args.name, args.overwrite)  # before any model loads or corpus is read
    settings = settings_from_args(lenses.FIT_TUNED_LENS, args)
    corpus = corpora.resolve(args.corpus, settings.seed, limit=args.limit).head(args.limit)
    lm = load_model(args.model, masked_lm=True)
    result = lenses.fit_tuned_lens(lm, corpus.sentences, args.name, corpus=corpus.name, steps=settings.steps,
                                   batch_tokens=settings.batch_tokens, seed=settings.seed,
                                   progress=stderr_progress(args), overwrite=args.overwrite)
    if args.json:
        validation.dump_json(result.to_json())
        return 0
    print(f"saved tuned lens '{result.name}' to {result.path} ({result.train_tokens} tokens, {result.steps} steps, "
          f"{result.seconds:.0f} s)")
    print("held-out KL to the final layer (nats)\nlayer\tlogit\ttuned")
    for layer, (a, b) in enumerate(zip(result.kl_logit_held_out, result.kl_tuned_held_out)):
        print(f"{layer}\t{a:.4f}\t{b:.4f}")
    return 0
