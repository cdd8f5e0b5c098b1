"""Hewitt & Manning (2019): a structural (distance) probe per layer; UUAS and DSpr beside their BERT-base numbers.

The paper probes bert-base-cased on the Penn Treebank (WSJ, Stanford Dependencies), which is not available
offline; UD English EWT stands in (train on a seeded sample of dev, score on a seeded sample of test), so even
on the paper's model and protocol the comparison is indicative. The probe budget is small (10 epochs by
default, H&M's early stop still on), far below their 40 epochs on ~40k sentences.
"""

from __future__ import annotations

from core import references
from core.analyses.probe import HM_LAYER_OFFSET, ProbeSettings, probe_data, probe_layers
from core.data import corpus as corpora
from core.model.loading import load_model
from core.progress import ProgressCallback, StopCheck
from core.studies import Study, StudyOptions, StudyResult

PAPER_MODEL = "bert-base-cased"
PROTOCOL = "hewitt-manning"
DEFAULT_TRAIN = 400
DEFAULT_EPOCHS = 10
DEFAULT_CORPUS = f"ud:dev:{DEFAULT_TRAIN}"


def run(options: StudyOptions, progress: ProgressCallback = None, should_stop: StopCheck = None) -> StudyResult:
    lm = load_model(options.model or PAPER_MODEL)
    n_train = options.limit or DEFAULT_TRAIN
    if options.corpus:
        train = corpora.require_trees(corpora.resolve(options.corpus, options.seed))
        data = probe_data(train, None, name=options.corpus, seed=options.seed, max_train=n_train)
        corpus_name = options.corpus
    else:
        # A seeded sample of dev to train on and of test to score on, as H&M train and score on separate splits.
        train = corpora.require_trees(corpora.resolve(f"ud:dev:{n_train}", options.seed))
        evaluation = corpora.require_trees(corpora.resolve(f"ud:test:{max(10, n_train // 2)}", options.seed))
        corpus_name = f"ud:dev:{n_train} / ud:test:{max(10, n_train // 2)}"
        data = probe_data(train, evaluation, name=f"UD English EWT ({corpus_name})", seed=options.seed)
    epochs = int(options.extra.get("epochs", DEFAULT_EPOCHS))
    settings = ProbeSettings.for_protocol(PROTOCOL, lm.hidden_size, epochs=epochs, seed=options.seed)
    result = probe_layers(lm, data, None, settings, progress=progress, should_stop=should_stop)

    uuas = {int(layer): float(v) for layer, v in zip(result.layers, result.uuas)}
    dspr = {int(layer): float(v) for layer, v in zip(result.layers, result.dspr)}
    best = {"UUAS": float(max(uuas, key=uuas.get)), "DSpr": float(max(dspr, key=dspr.get))}
    # Relative depth lets a model of another depth be set beside H&M's peak at layer 8 of 12.
    depth = {name: layer / lm.num_layers for name, layer in best.items()}
    depth["H&M, BERT-base layer 7 (BERT Lens 8 of 12)"] = (7 + HM_LAYER_OFFSET) / 12
    comparisons = tuple(
        references.compare(references.get(key), series, lm.ref, PROTOCOL, lm.num_layers)
        for key, series in (("hewitt-manning.uuas", uuas), ("hewitt-manning.dspr", dspr))
    )
    notes = (
        "Stand-in data: UD English EWT instead of the Penn Treebank with Stanford Dependencies, so the numbers are "
        "therefore indicative even on bert-base-cased.",
        f"Probe budget: {len(data.train)} training and {len(data.eval)} evaluation sentences, at most {epochs} "
        f"epochs (H&M: ~40k PTB sentences, up to 40 epochs), rank {settings.rank} (full rank, as H&M).",
        f"H&M's 'layer 7' is BERT Lens layer {7 + HM_LAYER_OFFSET}: their extraction keeps the 12 encoder outputs "
        "without the embedding layer and counts them from 0.",
        "H&M stop on the PTB dev split; here a held-back tenth of the training sentences decides the best epoch.",
        "H&M feed WordPiece directly (no basic tokenisation) with token_type_ids of 1; BERT Lens uses the model's "
        "own tokenizer on the treebank's words. Word vectors are word pieces averaged in both.",
        "The paper's per-layer curves are a figure without published numbers, so only layer 7 (BERT Lens 8) is "
        "compared; 'best layer' gives the measured peak to set beside it.",
    ) + ((f"{lm.ref} has {lm.num_layers} layers, so H&M's layer (BERT Lens 8 of 12) has no counterpart here: "
          "compare the relative depth of the best layer instead.",) if lm.num_layers < 7 + HM_LAYER_OFFSET else ())
    return StudyResult(
        study=STUDY.name, model=lm.ref, corpus=corpus_name, protocol=PROTOCOL, comparisons=comparisons,
        measured={"UUAS": uuas, "DSpr": dspr, "best layer": best, "best layer / number of layers": depth}, notes=notes,
    )


STUDY = Study(
    name="hewitt-manning",
    title="Hewitt & Manning (2019), A Structural Probe for Finding Syntax in Word Representations",
    model=PAPER_MODEL,
    data="Penn Treebank WSJ with Stanford Dependencies (train / dev / test)",
    stand_in="UD English EWT: a seeded sample of dev to train on, of test to score on",
    default_corpus=DEFAULT_CORPUS,
    protocol=PROTOCOL,
    cost_cpu="about 2 min on MiniLM-L6 (measured: 124 s CPU, 400 + 200 sentences, 10 epochs, 7 layers); "
             "bert-base-cased about 15 min (estimated)",
    cost_gpu="about 1-2 min on bert-base-cased (estimated)",
    summary="Trains a full-rank distance probe on every layer and compares UUAS and DSpr with H&M's BERT-base "
            "layer 7 (BERT Lens layer 8): 0.798 UUAS, 0.85 DSpr on the PTB.",
    run=run,
)
