"""Study `ethayarajh`: Ethayarajh (2019), "How contextual are contextualized word representations?", run with his
protocol (kawine/contextual: WordPiece tokens, every occurrence, at most 1,000 pairs per word, a baseline from
1,000 sampled sentences, MEV per word) and put beside his published bert-base-cased curves (core.references).

His sentences (STS 2012-16) are not available offline, so the default run uses SNLI train sentences instead.
Module-level imports stay light: the model, torch and the corpus load inside `run`.
"""

from __future__ import annotations

import numpy as np

from core import references
from core.analyses import anisotropy as an
from core.data import corpus as corpora
from core.model.loading import load_model
from core.progress import ProgressCallback, StopCheck
from core.studies import Study, StudyOptions, StudyResult

PAPER_MODEL = "bert-base-cased"
# 2,000 seeded SNLI pairs give about 4,000 unique sentences: enough for the paper's 1,000-sentence baseline
# sample and for a few hundred token types with >= 5 occurrences.
DEFAULT_CORPUS = "snli:train:2000"
MEASURES = (
    "random_cosine", "self_similarity", "intra_sentence", "mev", "mev_random",
    "adjusted_self_similarity", "adjusted_intra_sentence", "adjusted_mev",
)


def run(options: StudyOptions, progress: ProgressCallback = None, should_stop: StopCheck = None) -> StudyResult:
    lm = load_model(options.model or PAPER_MODEL)
    corpus = corpora.resolve(options.corpus or DEFAULT_CORPUS, options.seed, limit=options.limit).head(options.limit)
    settings = an.AnisotropySettings(protocol=an.PAPER_PROTOCOL, seed=options.seed)
    profile = an.measure_corpus(lm, corpus, settings, progress=progress, should_stop=should_stop)
    measured = {
        m: {int(layer): float(v) for layer, v in zip(profile.layers, getattr(profile, m)) if np.isfinite(v)}
        for m in MEASURES
    }
    comparisons = tuple(
        references.compare(ref, measured[ref.measure], lm.ref, profile.protocol, lm.num_layers)
        for ref in references.for_study("ethayarajh")
    )
    notes = [
        f"Paper: {PAPER_MODEL} on STS 2012-16 sentences (about 8,000 token types with 5+ occurrences). Here: "
        f"{lm.ref} on {corpus.name}, {profile.n_sentences} sentences, {profile.n_tokens} WordPiece tokens, "
        f"{len(profile.words)} token types with 5+ occurrences.",
    ]
    if (options.corpus or DEFAULT_CORPUS).startswith("snli"):
        notes.append("STS is not available offline: SNLI sentences stand in for it, so the numbers are indicative "
                     "(other sentences, shorter and more repetitive than STS).")
    if profile.n_baseline_sentences < settings.n_baseline_sentences:
        notes.append(f"The baseline sampled {profile.n_baseline_sentences} sentences, all the corpus has "
                     f"(the paper: {settings.n_baseline_sentences}); its spread is wider.")
    notes.append("MEV follows his code (sklearn PCA, centred): it cannot fall below 1/(n-1) for a word with n "
                 "occurrences, while his published variance_explained.csv mostly does, so expect measured MEV far "
                 "above the paper's whatever the model (see the reference's note).")
    notes.append("His per-word values are rounded to 3 decimals before averaging; BERT Lens does not round.")
    if profile.n_truncated:
        notes.append(f"{profile.n_truncated} sentences were cut to the model's maximum length.")
    return StudyResult("ethayarajh", lm.ref, corpus.name, profile.protocol, comparisons, measured, tuple(notes))


STUDY = Study(
    name="ethayarajh",
    title="Ethayarajh (2019): How contextual are contextualized word representations?",
    model=PAPER_MODEL,
    data="STS 2012-16 sentences",
    stand_in="SNLI train sentences (snli:train:2000, about 4,000 sentences)",
    default_corpus=DEFAULT_CORPUS,
    protocol="ethayarajh",
    cost_cpu="MiniLM-L6: 1 min 52 s measured (2 shared cores, load about 5; 85 s CPU, 1.3 GB peak); "
    "bert-base-cased: about 10-15 min and 3 GB estimated (8x the MiniLM's compute; every occurrence kept for MEV)",
    cost_gpu="about 1 min for bert-base-cased (estimated: the numpy MEV/self-similarity part stays on the CPU)",
    summary="Per layer: cosine of random words (the anisotropy baseline), self-similarity, intra-sentence "
    "similarity and maximum explainable variance (raw and anisotropy-adjusted), on WordPiece tokens with the "
    "paper's sampling, beside the curves in kawine/contextual's bert/ files.",
    run=run,
)
