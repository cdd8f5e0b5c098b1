"""`sae-train` and `sae-features`: the Sparse features tab of "Read the layers" from the command line."""

from __future__ import annotations

from core import validation
from core.analyses import sparse_features as sf
from core.commands import (add_json_arguments, add_model_argument, add_settings_arguments, counted, settings_from_args,
                           stderr_progress, warn)
from core.data import corpus as corpora
from core.model import distributed
from core.model.loading import load_model


def register(subparsers) -> None:
    p = subparsers.add_parser(
        sf.SAE_TRAIN.command,
        help=sf.SAE_TRAIN.summary,
        description="Encodes the corpus (each rank its share under torchrun / accelerate launch), then trains "
        "z = ReLU(TopK_k(W_enc^T((x / input_scale) - b_dec) + b_enc)) on hidden_states[LAYER] at the non-special "
        "tokens, and saves models_cache/saes/NAME (sae.safetensors + config.json). Run the same command again after "
        "a stop to resume from its last saved state.",
    )
    add_model_argument(p)
    p.add_argument("--corpus", required=True,
                   help=f"{corpora.CLI_HELP} (here a dataset without N samples {sf.DEFAULT_PAIRS:,} items)")
    p.add_argument("--limit", type=validation.positive, default=None, help="the first N inputs of --corpus only")
    p.add_argument("--layer", type=validation.count, required=True, help="0 = the embeddings, L = the last layer")
    # dest "name": core/__main__.py clears args.out (the JSON file of other commands) on every rank but the first
    p.add_argument("--out", dest="name", required=True, metavar="NAME",
                   help="the saved SAE's name (models_cache/saes/NAME)")
    add_settings_arguments(p, sf.SAE_TRAIN)  # --features, --k, --batch, --steps, --epochs, --lr, --seed
    for action in p._actions:  # F and k have no default: the command asks for them, as before
        if action.dest in ("features", "k"):
            action.required = True
    p.add_argument("--device", default=None, help="cpu, cuda, ... (default: CUDA when there is one)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a saved SAE of that name (kept until the new one is saved); without it the name is refused")
    add_json_arguments(p, "one JSON object: name, path, held-out fve, dead_fraction, ...")
    p.set_defaults(func=run_train)

    p = subparsers.add_parser(
        sf.SAE_FEATURES.command,
        help=sf.SAE_FEATURES.summary,
        description="JSON keys: sae, model, layer, text, tokens (the non-special word pieces), positions (their "
        "index among all tokens), features (each firing feature: feature, max, token = index into tokens of its "
        "max, tokens_active; largest max first), active (per token, its features and values, largest first), "
        "reconstruction_fve (fraction of these vectors' variance the SAE reconstructs).",
    )
    p.add_argument("--sae", required=True, help="a saved SAE's name (python -m core models --json lists them)")
    p.add_argument("--text", required=True, help="the sentence")
    p.add_argument("--text-b", default=None, help="a second sentence (a pair)")
    p.add_argument("--model", default=None, help="default: the model the SAE was trained on")
    add_json_arguments(p)
    p.set_defaults(func=run_features)


def run_train(args) -> int:
    sf.check_name(args.name)
    sf.check_free_name(args.name, args.overwrite)  # before the corpus is read and the model loads
    settings = settings_from_args(sf.SAE_TRAIN, args)
    settings.check()
    corpus = corpora.resolve(args.corpus, settings.seed, default_n=sf.DEFAULT_PAIRS).take(args.limit)
    ctx = distributed.current()
    lm = load_model(args.model, device=ctx.device if ctx.distributed else args.device)
    spec = f"{args.corpus}" + (f" (first {args.limit})" if args.limit else "")
    result, truncated = counted(lambda: sf.train_sae(lm, corpus.sentences, args.layer, settings, args.name, corpus=spec,
                                                     progress=stderr_progress(args), overwrite=args.overwrite))
    if not ctx.is_main:
        return 0
    warn(result.quality.warning)  # an FVE under 0.8, on stderr (the JSON's "warning" says it too)
    if args.json:
        validation.dump_json({**result.to_json(), "truncated": truncated})
        return 0
    print(f"saved {result.name} at {result.path}: layer {result.layer}, F = {result.F}, k = {result.k}, "
          f"{result.steps} steps on {result.train_tokens} tokens in {result.seconds:.0f} s")
    q = result.quality
    print(f"held-out tokens {q.n_tokens}: fraction of variance explained {q.fve:.3f}, dead features "
          f"{100 * q.dead_fraction:.1f} %, active per token {q.mean_active:.1f}")
    return 0


def run_features(args) -> int:
    sae = sf.load_sae(args.sae)
    lm = load_model(args.model or sae.model)
    found = sf.sentence_features(sae, lm, args.text, args.text_b)
    if args.json:
        validation.dump_json(found.to_json(), args.out)
        return 0
    print(f"{found.sae}: layer {found.layer} of {found.model}; {len(found.features)} features fire "
          f"(reconstruction fve {found.reconstruction_fve:.3f})")
    print("feature\tmax\tat token")
    for row in found.to_json()["features"][:20]:
        print(f"{row['feature']}\t{row['max']:.3f}\t{found.tokens[row['token']]}")
    return 0
