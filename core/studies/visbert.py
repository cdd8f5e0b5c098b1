"""van Aken et al. (2019), VisBERT: a new PCA per layer on the tokens of one input, to watch tokens cluster and
separate layer by layer.

The paper shows pictures and publishes no per-layer numbers, so there is nothing to put a measured number
beside: the study reports the measured share of each layer's variance on its two principal axes, and says the
comparison is qualitative.
"""

from __future__ import annotations

import numpy as np

from core.analyses.projection import collect_tokens, layerwise_projection
from core.data import corpus as corpora
from core.model.encoding import encode
from core.model.loading import load_model
from core.progress import ProgressCallback, StopCheck, check_stop
from core.studies import Study, StudyOptions, StudyResult

PAPER_MODEL = "bert-base-uncased"
PROTOCOL = "visbert"
DEFAULT_CORPUS = "builtin"
NO_NUMBERS = "No published numbers: qualitative. VisBERT shows per-layer PCA pictures only."


def run(options: StudyOptions, progress: ProgressCallback = None, should_stop: StopCheck = None) -> StudyResult:
    lm = load_model(options.model or PAPER_MODEL)
    spec = options.corpus or DEFAULT_CORPUS
    # One input, as VisBERT (a question with its context); a larger limit projects that many inputs, each on its own.
    inputs = corpora.resolve(spec, options.seed, limit=options.limit or 1).take(options.limit or 1).inputs
    first, both = [], []
    for k, item in enumerate(inputs):
        check_stop(should_stop)
        tokens = collect_tokens(encode(lm, [item], attentions=False))
        projection = layerwise_projection(tokens, protocol=PROTOCOL)
        first.append(projection.explained_variance_ratio[:, 0])
        both.append(projection.explained_variance_ratio.sum(axis=1))
        if progress is not None:
            progress(k + 1, len(inputs))
    layers = range(len(first[0]))
    measured = {
        "explained variance, PC 1": {layer: float(np.mean([f[layer] for f in first])) for layer in layers},
        "explained variance, PC 1 + PC 2": {layer: float(np.mean([b[layer] for b in both])) for layer in layers},
    }
    notes = (
        NO_NUMBERS,
        f"Measured: a new PCA per layer on each of {len(inputs)} input(s) from {spec} (mean over inputs when more "
        "than one): the share of that layer's token variance on its first two axes.",
        "VisBERT's inputs are SQuAD, HotpotQA and bAbI questions with their contexts, on BERT fine-tuned for QA; "
        "the input here is a stand-in.",
    )
    return StudyResult(study=STUDY.name, model=lm.ref, corpus=spec, protocol=PROTOCOL, comparisons=(),
                       measured=measured, notes=notes)


STUDY = Study(
    name="visbert",
    title="van Aken et al. (2019), VisBERT: Hidden-State Visualizations for Transformers",
    model=PAPER_MODEL,
    data="SQuAD, HotpotQA and bAbI question-answering inputs",
    stand_in="the first built-in sentence (one input)",
    default_corpus=DEFAULT_CORPUS,
    protocol=PROTOCOL,
    cost_cpu="a few seconds (measured on MiniLM-L6: 5 s, model load included)",
    cost_gpu="a few seconds (estimated)",
    summary="A new PCA per layer on one input; reports each layer's explained variance. No published numbers: "
            "qualitative.",
    run=run,
)
