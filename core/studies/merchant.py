"""Merchant et al. (2020): how far fine-tuning moves each layer, by RSA between a pre-trained model and its
fine-tuned copy, layer l against layer l, on a seeded random sample of words.

The paper's finding (abstract): fine-tuning primarily affects the top layers, with dependency parsing the
exception. The study measures RSA (and linear CKA, not in the paper) per layer and checks that finding as a
yes/no; the paper's per-layer RSA values are figures without published numbers and are not compared.
"""

from __future__ import annotations

from core import references
from core.analyses.similarity import compare_models
from core.data import corpus as corpora
from core.model.loading import load_model
from core.progress import ProgressCallback, StopCheck
from core.studies import Study, StudyOptions, StudyResult, degeneracy_of

PAPER_MODEL = "bert-base-uncased"
PROTOCOL = "merchant"
DEFAULT_CORPUS = "snli:dev:500"
DEFAULT_WORDS = 1500
FINETUNED_KEY = "finetuned"
MISSING_FINETUNED = (
    "The merchant study compares a pre-trained model with a fine-tuned copy of it, and none was given: pass the "
    f"fine-tuned run or model as the extra option '{FINETUNED_KEY}' and the pre-trained model it started from as "
    f"the model, e.g. `python -m core reproduce merchant --model bert-base-uncased --set {FINETUNED_KEY}=my-snli-run` "
    "(a finished run under models_cache/runs, or a model folder)."
)


def top_layers_change_most(rsa: dict[int, float]) -> float:
    """1.0 when the least similar layer lies in the top third of the layers and the top third's mean RSA is
    below the bottom third's, else 0.0 (the reference's yes/no reading of Merchant et al.'s finding)."""
    layers = sorted(rsa)
    third = max(1, len(layers) // 3)
    bottom, top = layers[:third], layers[-third:]
    lowest = min(layers, key=lambda layer: rsa[layer])
    mean = lambda keys: sum(rsa[k] for k in keys) / len(keys)  # noqa: E731
    return 1.0 if lowest in top and mean(top) < mean(bottom) else 0.0


def run(options: StudyOptions, progress: ProgressCallback = None, should_stop: StopCheck = None) -> StudyResult:
    finetuned = options.extra.get(FINETUNED_KEY)
    if not finetuned:
        raise ValueError(MISSING_FINETUNED)
    base, tuned = load_model(options.model or PAPER_MODEL), load_model(str(finetuned))
    spec = options.corpus or DEFAULT_CORPUS
    corpus = corpora.resolve(spec, options.seed, limit=options.limit)
    sentences = list(corpus.head(options.limit).sentences)
    max_words = int(options.extra.get("max_words", DEFAULT_WORDS))
    result = compare_models(base, tuned, sentences, max_words=max_words, seed=options.seed, protocol=PROTOCOL,
                            progress=progress, should_stop=should_stop)
    rsa = {int(layer): float(v) for layer, v in zip(result.layers, result.rsa)}
    cka = {int(layer): float(v) for layer, v in zip(result.layers, result.cka)}
    claim = {"top layers change most": top_layers_change_most(rsa)}
    comparison = references.compare(references.get("merchant.top-layers-change-most"), claim, base.ref, PROTOCOL)
    notes = (
        f"RSA of {base.ref} against {tuned.ref} on {result.n_words} words sampled (seed {options.seed}) from "
        f"{result.n_sentences} sentences of {spec}; {result.n_skipped} sentences skipped (split differently).",
        "Merchant et al. fine-tuned BERT-base on MNLI, SQuAD and dependency parsing and sampled words from those "
        "tasks' data; here the data is the corpus given (SNLI dev by default), so the numbers are indicative.",
        "The paper's per-layer RSA is only drawn in figures; its finding is compared as yes/no: the least similar "
        "layer is in the top third and the top third is less similar than the bottom third on average.",
        "Linear CKA is BERT Lens's addition (Kornblith et al. 2019), not part of the paper.",
    )
    return StudyResult(
        study=STUDY.name, model=f"{base.ref} vs {tuned.ref}", corpus=spec, protocol=PROTOCOL,
        comparisons=(comparison,), measured={"RSA": rsa, "linear CKA": cka, "finding": claim}, notes=notes,
        degenerate=degeneracy_of(str(finetuned)),
    )


STUDY = Study(
    name="merchant",
    title="Merchant et al. (2020), What Happens To BERT Embeddings During Fine-tuning?",
    model=PAPER_MODEL,
    data="MNLI, SQuAD and dependency-parsing data, with BERT-base fine-tuned on each",
    stand_in="SNLI dev sentences and a fine-tuned run given as the extra option 'finetuned'",
    default_corpus=DEFAULT_CORPUS,
    protocol=PROTOCOL,
    cost_cpu="about 50 s on MiniLM-L6 (measured: 47 s CPU, SNLI dev 500 pairs, 1,500 words); bert-base about "
             "4 min (estimated)",
    cost_gpu="under 1 min on bert-base (estimated)",
    summary="RSA per layer between the pre-trained model and a fine-tuned copy on a seeded random sample of "
            "words; checks the paper's finding that the top layers change most.",
    run=run,
)
