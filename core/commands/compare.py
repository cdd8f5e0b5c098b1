"""`compare` (RSA and linear CKA per layer between two models) and `probe` (Hewitt & Manning distance probe):
the command-line twin of the "What fine-tuning changes" section."""

from __future__ import annotations

import sys

from core.data import corpus as corpora
from core import validation
from core.commands import add_hidden_alias, add_json_arguments, add_model_argument, add_two_models_arguments, counted, two_models, warn_cuts
from core.model.loading import load_model
from core.analyses.probe import PROTOCOLS as PROBE_PROTOCOLS
from core.analyses.probe import ProbeSettings, probe_data, probe_layers, random_control
from core.protocols import DEFAULT as DEFAULT_PROTOCOL
from core.analyses.similarity import DEFAULT_MAX_WORDS, compare_models
from core.analyses.similarity import PROTOCOLS as SIMILARITY_PROTOCOLS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compare",
        help="RSA and linear CKA between two models, layer by layer",
        description="Word vectors (word pieces averaged, special tokens left out) of both models on the same "
        "sentences; RSA = Pearson correlation of the two word-by-word cosine-similarity matrices, CKA = linear "
        "CKA (Kornblith et al. 2019). Sentences the two tokenizers split differently are skipped. The words are a "
        "seeded random sample (--seed): whole sentences in random order (bertlens) or words drawn uniformly from "
        "the whole corpus (merchant).",
    )
    add_two_models_arguments(p)
    p.add_argument("--corpus", required=True, help=corpora.CLI_HELP)
    p.add_argument("--seed", type=validation.count, default=0, help="seed of the corpus sample and of the word sample (default 0)")
    p.add_argument("--limit", type=validation.positive, default=500, help="sentences read from the corpus (default 500)")
    p.add_argument("--max-words", type=validation.positive, default=DEFAULT_MAX_WORDS, help=f"words compared (default {DEFAULT_MAX_WORDS}); memory grows with its square")
    p.add_argument("--cross", action="store_true", help="also print every layer of A against every layer of B")
    p.add_argument("--protocol", choices=SIMILARITY_PROTOCOLS, default=DEFAULT_PROTOCOL,
                   help="bertlens: random whole sentences (default); merchant: words sampled uniformly (Merchant et al. 2020)")
    add_json_arguments(p, "JSON: layers, rsa, cka, rsa_cross, cka_cross, ...")
    p.set_defaults(func=run_compare)

    q = subparsers.add_parser(
        "probe",
        help="structural (distance) probe per layer on a CoNLL-U treebank: UUAS and DSpr",
        description="Trains a rank-K linear map per layer so squared distances between projected word vectors "
        "match dependency-tree distances (Hewitt & Manning 2019). Scores are measured on --eval-treebank, or on a "
        "seeded held-out fifth of --corpus. Results are cached per (model, layer, corpus, settings).",
    )
    add_model_argument(q)
    q.add_argument("--corpus", "--treebank", dest="corpus", required=True,
                   help="sentences with dependency trees to train on: ud[:SPLIT[:N]] or a .conllu file (" + corpora.CLI_HELP + ")")
    q.add_argument("--eval-corpus", "--eval-treebank", dest="eval_corpus", default=None,
                   help="the same kind of spec to score on (default: held-out part of --corpus)")
    q.add_argument("--layers", default="all", type=validation.layer_list, help="comma-separated layers, 0 = embeddings, or 'all' (default)")
    q.add_argument("--protocol", choices=PROBE_PROTOCOLS, default=DEFAULT_PROTOCOL,
                   help="bertlens (default) or hewitt-manning: full rank, up to 40 epochs with early stop, H&M's "
                   "PTB punctuation tags left out of UUAS")
    q.add_argument("--rank", type=validation.positive, default=None, help="rank K of the probe (default 128; hewitt-manning: the hidden size)")
    q.add_argument("--epochs", type=validation.positive, default=None, help="training epochs (default 10; hewitt-manning: at most 40)")
    q.add_argument("--lr", type=validation.positive_number, default=1e-3, help="Adam learning rate (default 1e-3, as H&M)")
    q.add_argument("--train-limit", type=validation.positive, default=None, help="seeded subset of training sentences")
    q.add_argument("--eval-limit", type=validation.positive, default=None, help="seeded subset of evaluation sentences")
    add_hidden_alias(q, "--max-train", "--train-limit")
    add_hidden_alias(q, "--max-eval", "--eval-limit")
    q.add_argument("--seed", type=validation.count, default=0)
    q.add_argument("--random-init", action="store_true", help="probe a random-initialised copy of the model (the control)")
    q.add_argument("--no-cache", action="store_true", help="retrain even when cached results exist")
    add_json_arguments(q, "JSON: layers, uuas, dspr")
    q.set_defaults(func=run_probe)


def _progress(label: str, quiet: bool):
    if quiet:
        return None

    def report(done: int, total: int) -> None:
        print(f"\r{label}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True)

    return report


def run_compare(args) -> int:
    sentences = list(corpora.resolve(args.corpus, args.seed, limit=args.limit).head(args.limit).sentences)
    a, b = (load_model(ref) for ref in two_models(args))
    result, truncated = counted(lambda: compare_models(a, b, sentences, max_words=args.max_words, seed=args.seed,
                                                       protocol=args.protocol, progress=_progress("encoding", args.quiet)))
    if args.json:
        validation.dump_json({**result.to_json(), "truncated": truncated}, args.out)
        return 0
    print(f"{result.model_a} vs {result.model_b}: {result.n_words} words in {result.n_sentences} sentences, "
          f"protocol {result.protocol}, seed {result.seed}"
          + (f" ({result.n_skipped} skipped: split into different words)" if result.n_skipped else ""))
    print("layer\tRSA\tCKA")
    for layer, r, c in zip(result.layers, result.rsa, result.cka):
        print(f"{layer}\t{r:.3f}\t{c:.3f}")
    if args.cross:
        print("CKA, rows = layers of A, columns = layers of B:")
        for row in result.cka_cross:
            print("\t".join(f"{v:.2f}" for v in row))
    return 0


def parse_layers(text: str, num_layers: int) -> list[int] | None:
    if text.strip().lower() == "all":
        return None
    try:
        layers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--layers {text!r}: give comma-separated numbers such as 0,6,12, or 'all'") from None
    bad = [layer for layer in layers if not 0 <= layer <= num_layers]
    if bad or not layers:
        raise ValueError(f"--layers {text!r}: this model has layers 0 to {num_layers}")
    return layers


def run_probe(args) -> int:
    # The treebanks first: a bad spec or file is reported before any model loads.
    train = corpora.require_trees(corpora.resolve(args.corpus, args.seed))
    evaluation = corpora.require_trees(corpora.resolve(args.eval_corpus, args.seed)) if args.eval_corpus else None
    lm = load_model(args.model)
    layers = parse_layers(args.layers, lm.num_layers)
    settings = ProbeSettings.for_protocol(args.protocol, lm.hidden_size, rank=args.rank, epochs=args.epochs,
                                          learning_rate=args.lr, seed=args.seed)
    data = probe_data(train, evaluation, name=args.corpus + (f" / {args.eval_corpus}" if evaluation else ""),
                      seed=args.seed, max_train=args.train_limit, max_eval=args.eval_limit)
    model = random_control(lm, args.seed) if args.random_init else lm
    # The result carries its own count (stored with each cached probe, gathered over ranks), not counted(): a cached
    # probe runs no forward pass, and under torchrun a rank encodes only its share.
    result = probe_layers(model, data, layers, settings, use_cache=not args.no_cache, progress=_progress("probe", args.quiet))
    warn_cuts(result)
    if args.json:
        validation.dump_json(result.to_json(), args.out)
        return 0
    print(f"{result.model} on {data.name}: {len(data.train)} training, {len(data.eval)} evaluation sentences, "
          f"rank {settings.rank}, protocol {settings.protocol}")
    print("layer\tUUAS\tDSpr")
    for layer, u, d in zip(result.layers, result.uuas, result.dspr):
        print(f"{layer}\t{u:.3f}\t{d:.3f}")
    return 0
