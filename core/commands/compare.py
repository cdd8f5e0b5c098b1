"""`compare` (RSA and linear CKA per layer between two models) and `probe` (Hewitt & Manning distance probe):
the command-line twin of the "What fine-tuning changes" section."""

from __future__ import annotations

import sys

from core.data import corpus as corpora
from core import validation
from core.analyses import changes
from core.analyses import probe as probes
from core.analyses import similarity
from core.commands import (add_hidden_alias, add_json_arguments, add_model_argument, add_settings_arguments,
                           add_two_models_arguments, counted, settings_from_args, two_models, warn_cuts)
from core.model.loading import load_model
from core.views import analysis


def register(subparsers) -> None:
    compare = analysis("compare")
    p = subparsers.add_parser(
        compare.command,
        help=compare.summary,
        description="Word vectors (word pieces averaged, special tokens left out) of both models on the same "
        "sentences; RSA = Pearson correlation of the two word-by-word cosine-similarity matrices, CKA = linear "
        "CKA (Kornblith et al. 2019). Sentences the two tokenizers split differently are skipped. The words are a "
        "seeded random sample (--seed): whole sentences in random order (bertlens) or words drawn uniformly from "
        "the whole corpus (merchant).",
    )
    add_two_models_arguments(p)
    p.add_argument("--corpus", required=True, help=corpora.CLI_HELP)
    add_settings_arguments(p, compare)  # --max-words, --seed, --protocol
    p.add_argument("--limit", type=validation.positive, default=changes.COMPARE_LIMIT,
                   help=f"sentences read from the corpus (default {changes.COMPARE_LIMIT})")
    p.add_argument("--cross", action="store_true", help="also print every layer of A against every layer of B")
    add_json_arguments(p, "JSON: layers, rsa, cka, rsa_cross, cka_cross, ...")
    p.set_defaults(func=run_compare)

    probe = analysis("probe")
    q = subparsers.add_parser(
        probe.command,
        help=probe.summary,
        description="Trains a rank-K linear map per layer so squared distances between projected word vectors "
        "match dependency-tree distances (Hewitt & Manning 2019). Scores are measured on --eval-treebank, or on a "
        "seeded held-out fifth of --corpus. Results are cached per (model, layer, corpus, settings).",
    )
    add_model_argument(q)
    q.add_argument("--corpus", "--treebank", dest="corpus", required=True,
                   help="sentences with dependency trees to train on: ud[:SPLIT[:N]] or a .conllu file (" + corpora.CLI_HELP + ")")
    q.add_argument("--eval-corpus", "--eval-treebank", dest="eval_corpus", default=None,
                   help="the same kind of spec to score on (default: held-out part of --corpus)")
    # --layers, --protocol, --rank, --epochs, --lr, --seed, --random-init
    add_settings_arguments(q, probe)
    q.add_argument("--train-limit", type=validation.positive, default=None, help="seeded subset of training sentences")
    q.add_argument("--eval-limit", type=validation.positive, default=None, help="seeded subset of evaluation sentences")
    add_hidden_alias(q, "--max-train", "--train-limit")
    add_hidden_alias(q, "--max-eval", "--eval-limit")
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
    settings = settings_from_args(analysis("compare"), args)
    sentences = list(corpora.resolve(args.corpus, settings.seed, limit=args.limit).head(args.limit).sentences)
    models = tuple(load_model(ref) for ref in two_models(args))
    result, truncated = counted(lambda: similarity.run_compare(models, sentences, settings,
                                                            progress=_progress("encoding", args.quiet)))
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


def run_probe(args) -> int:
    # The treebanks first: a bad spec or file is reported before any model loads.
    chosen = settings_from_args(analysis("probe"), args)
    changes.probe_layer_numbers(chosen.layers)  # a misspelt --layers: refused before anything is read
    data = probes.probe_inputs(args.corpus, args.eval_corpus, chosen.seed, args.train_limit, args.eval_limit)
    lm = load_model(args.model)
    changes.probe_layer_numbers(chosen.layers, lm.num_layers)  # a layer the model lacks: refused before training
    settings = probes.probe_settings(chosen, lm.hidden_size)
    # The result carries its own count (stored with each cached probe, gathered over ranks), not counted(): a cached
    # probe runs no forward pass, and under torchrun a rank encodes only its share.
    result = probes.run_probe(lm, data, chosen, progress=_progress("probe", args.quiet), use_cache=not args.no_cache)
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
