"""Every published number BERT Lens draws beside a measured one, with its provenance, in one place.

A `Reference` says which model, corpus, unit and protocol the paper measured with and where the number comes
from (file, table or figure). `overlay_kind` decides how a chart may draw it: "same" (same model and protocol:
the numbers are comparable) or "shape" (published, other model/corpus: compare the shape only). `compare`
puts measured values beside a reference and gives a plain verdict.

Sections below are one per paper; keep each reference's `source` precise enough to find the number again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping

import numpy as np

OverlayKind = Literal["same", "shape"]
Verdict = Literal["reproduced", "differs", "different model: shape only", "not measured"]

SAME_LABEL = "same model and protocol"
SHAPE_LABEL = "published, other model/corpus — compare the shape"


@dataclass(frozen=True)
class Reference:
    """A published curve or table.

    values: key -> number; the key is a layer index (int, 0 = embeddings, as BERT Lens counts) for per-layer
        curves, or a row name (str) for tables. Layer keys are already shifted into BERT Lens's numbering;
        `layer_note` says how the paper numbered them.
    tolerance: absolute difference within which a measurement on the same model and protocol counts as
        reproducing the paper (the paper's own spread where it gives one, else read-off precision).
    """

    key: str
    study: str
    measure: str
    label: str
    model: str
    corpus: str
    unit: str
    protocol: str
    source: str
    values: Mapping[int | str, float]
    tolerance: float
    layer_note: str = ""
    note: str = ""

    def to_json(self) -> dict:
        return {
            "key": self.key, "study": self.study, "measure": self.measure, "label": self.label, "model": self.model,
            "corpus": self.corpus, "unit": self.unit, "protocol": self.protocol, "source": self.source,
            "values": {str(k): float(v) for k, v in self.values.items()}, "tolerance": self.tolerance,
            "layer_note": self.layer_note, "note": self.note,
        }


def _model_name(ref: str) -> str:
    """'bert-base-cased', 'google-bert/bert-base-cased', '/x/models_cache/hub/bert-base-cased' -> 'bert-base-cased'."""
    return ref.rstrip("/").split("/")[-1].lower()


def same_model(model: str, reference: Reference) -> bool:
    return _model_name(model) == _model_name(reference.model)


def overlay_kind(reference: Reference, model: str, protocol: str) -> OverlayKind:
    """'same' only when both the model and the protocol match the paper's; otherwise 'shape'."""
    return "same" if same_model(model, reference) and protocol == reference.protocol else "shape"


def overlay_label(reference: Reference, model: str, protocol: str) -> str:
    """Legend text for a reference line: who, which model and corpus, and how it may be compared."""
    kind = SAME_LABEL if overlay_kind(reference, model, protocol) == "same" else SHAPE_LABEL
    return f"{reference.label} ({reference.model}, {reference.corpus}; {kind})"


@dataclass(frozen=True)
class ComparisonRow:
    """One number: paper beside measured. key: layer (int) or row name (str); measured None when not measured."""

    measure: str
    key: int | str
    paper: float
    measured: float | None
    tolerance: float

    @property
    def within(self) -> bool | None:
        return None if self.measured is None else bool(abs(self.measured - self.paper) <= self.tolerance)

    def to_json(self) -> dict:
        return {"measure": self.measure, "key": self.key, "paper": self.paper, "measured": self.measured,
                "tolerance": self.tolerance, "within": self.within}


@dataclass(frozen=True)
class Comparison:
    """rows: one per number the reference gives; kind: 'same' or 'shape'; shape_correlation: Pearson r between the
    paper's and the measured values over the keys both have (None under 3 keys), the one thing a 'shape' overlay
    can be judged on."""

    reference: Reference
    rows: tuple[ComparisonRow, ...]
    kind: OverlayKind
    verdict: Verdict
    shape_correlation: float | None

    def to_json(self) -> dict:
        return {"reference": self.reference.to_json(), "rows": [r.to_json() for r in self.rows], "kind": self.kind,
                "verdict": self.verdict, "shape_correlation": self.shape_correlation}


def compare(reference: Reference, measured: Mapping[int | str, float], model: str, protocol: str) -> Comparison:
    """Measured values beside the paper's. Verdict: 'different model: shape only' unless model and protocol match;
    then 'reproduced' if every number the paper gives was measured and lies within the tolerance, else 'differs';
    'not measured' when none of the paper's keys was measured."""
    rows = tuple(
        ComparisonRow(reference.measure, k, float(v), None if measured.get(k) is None else float(measured[k]), reference.tolerance)
        for k, v in reference.values.items()
    )
    both = [r for r in rows if r.measured is not None]
    correlation = None
    if len(both) >= 3:
        a = np.array([r.paper for r in both])
        b = np.array([r.measured for r in both])
        if a.std() > 0 and b.std() > 0:
            correlation = float(np.corrcoef(a, b)[0, 1])
    kind = overlay_kind(reference, model, protocol)
    if not both:
        verdict: Verdict = "not measured"
    elif kind == "shape":
        verdict = "different model: shape only"
    else:
        verdict = "reproduced" if len(both) == len(rows) and all(r.within for r in rows) else "differs"
    return Comparison(reference, rows, kind, verdict, correlation)


_REGISTRY: dict[str, Reference] = {}


def register(*references: Reference) -> None:
    for r in references:
        if r.key in _REGISTRY:
            raise ValueError(f"Reference '{r.key}' is registered twice.")
        _REGISTRY[r.key] = r


def get(key: str) -> Reference:
    try:
        return _REGISTRY[key]
    except KeyError:
        raise KeyError(f"No reference '{key}'; known: {', '.join(sorted(_REGISTRY))}") from None


def for_study(study: str) -> list[Reference]:
    return [r for r in _REGISTRY.values() if r.study == study]


def all_references() -> list[Reference]:
    return list(_REGISTRY.values())


# =========================================================================================================
# Ethayarajh (2019) — kawine/contextual
# =========================================================================================================


# =========================================================================================================
# Clark et al. (2019) — clarkkev/attention-analysis
# =========================================================================================================


# =========================================================================================================
# Kovaleva et al. (2019) — Revealing the Dark Secrets of BERT
# =========================================================================================================


# =========================================================================================================
# Hewitt & Manning (2019) — john-hewitt/structural-probes
# =========================================================================================================


# =========================================================================================================
# Merchant et al. (2020) — What happens to BERT embeddings during fine-tuning?
# =========================================================================================================


# =========================================================================================================
# van Aken et al. (2019) — VisBERT
# =========================================================================================================


# =========================================================================================================
# CS4650 slides (Ge & Zhu) — layer-12 removal, contrastive learning, biased SNLI
# =========================================================================================================

# Every number below is printed in the slides' text (shared/references/000_edf1dbe37e535216.txt); nothing is
# read off a figure. Their "BERT" is a 12-layer, 768-wide BertForSequenceClassification (the printed module
# tree); cased or uncased is not stated, so the model is recorded as bert-base-uncased, the Hugging Face
# tutorial default whose AdamW(lr=5e-5, eps=1e-8) call the slides copy. The SNLI test accuracies are exact
# fractions of the 9,824 labelled test pairs (8,886, 8,874 and 5,842 correct), so the slides' "test dataset" is
# the full SNLI test split. They report one run each: the tolerance is two binomial standard errors of the
# test-set accuracy (test sampling only; seed-to-seed spread would add to it).
# The contrastive-learning slide shows its per-layer random-word cosines only as figures with no numbers in
# the text, so no reference is registered for it (the slides-contrastive study reports its own curves).
SLIDES_SOURCE = "CS4650 final presentation slides (Ge & Zhu), shared/references/000_edf1dbe37e535216.txt"
SLIDES_MODEL = "bert-base-uncased"
SLIDES_MODEL_NOTE = ("The slides' model is a 12-layer, 768-wide BERT (printed module tree); casing is not stated "
                     "(uncased assumed).")
SLIDES_ALL_LAYERS = "12 layers, linear head"
SLIDES_MINUS_LAST = "11 layers (layer 12 removed), MLP head"
SLIDES_DATA_ONLY = "none (data filter only)"

register(
    Reference(
        key="slides-layer12-snli", study="slides-layer12", measure="test accuracy",
        label="CS4650 slides, remove layer 12 (SNLI)", model=SLIDES_MODEL, corpus="SNLI 1.0 train -> test (9,824 pairs)",
        unit="accuracy (fraction of test pairs)", protocol="slides",
        source=SLIDES_SOURCE + ", 'Remove Layer 12 Experiment', Experiment 1: 'Accuracy on test dataset: "
               "90.45195439739413' (original BERT) and '90.32980456026058' (BERT w/o Layer 12)",
        values={SLIDES_ALL_LAYERS: 0.9045195439739413, SLIDES_MINUS_LAST: 0.9032980456026058},
        tolerance=0.006,
        note=SLIDES_MODEL_NOTE + " Depth and head changed together: the full model has BERT's linear classifier "
             "after dropout, the 11-layer one a 768->50->3 ReLU MLP with no dropout module before it. 2 epochs, "
             "17,168 train batches (batch 32). Tolerance: 2 binomial standard errors on 9,824 pairs.",
    ),
    Reference(
        key="slides-layer12-snli-seconds", study="slides-layer12", measure="train seconds",
        label="CS4650 slides, remove layer 12 (SNLI), training time", model=SLIDES_MODEL,
        corpus="SNLI 1.0 train (549,367 pairs, 2 epochs)", unit="seconds (hardware not stated)", protocol="slides",
        source=SLIDES_SOURCE + ", Experiment 1: 'total time: 6140.41s' and '5623.56s'",
        values={SLIDES_ALL_LAYERS: 6140.41, SLIDES_MINUS_LAST: 5623.56},
        tolerance=0.0,
        note="Wall time on unstated hardware: compare the ratio (0.916), never the seconds (tolerance 0: not a target).",
    ),
    Reference(
        key="slides-layer12-drugs", study="slides-layer12", measure="test accuracy",
        label="CS4650 slides, remove layer 12 (drug reviews)", model=SLIDES_MODEL,
        corpus="drug reviews with Age/Condition/.../Satisfaction columns (WebMD-style; 7,021 train batches), 3 classes",
        unit="accuracy (fraction of test reviews)", protocol="slides",
        source=SLIDES_SOURCE + ", Experiment 2: 'Accuracy on test dataset: 58.90691741813004' (original BERT) and "
               "'58.66961319411485' (BERT w/o Layer 12)",
        values={SLIDES_ALL_LAYERS: 0.5890691741813004, SLIDES_MINUS_LAST: 0.5866961319411485},
        tolerance=0.01,
        note=SLIDES_MODEL_NOTE + " The slides call the data 'MedWeb' and show WebMD-style columns and a 3-class "
             "head; BERT Lens's 'drugs' task is Druglib effectiveness 1-5, a different corpus and label set, so "
             "these numbers are a shape to compare, never a target. Test size not stated: tolerance 0.01 "
             "(2 standard errors at ~10,000 reviews).",
    ),
    Reference(
        key="slides-layer12-drugs-seconds", study="slides-layer12", measure="train seconds",
        label="CS4650 slides, remove layer 12 (drug reviews), training time", model=SLIDES_MODEL,
        corpus="drug reviews (7,021 train batches, 2 epochs)", unit="seconds (hardware not stated)", protocol="slides",
        source=SLIDES_SOURCE + ", Experiment 2: 'total time: 2652.56s' and '2447.34s'",
        values={SLIDES_ALL_LAYERS: 2652.56, SLIDES_MINUS_LAST: 2447.34},
        tolerance=0.0,
        note="Wall time on unstated hardware: compare the ratio (0.923), never the seconds (tolerance 0: not a target).",
    ),
    Reference(
        key="slides-bias-accuracy", study="slides-bias", measure="test accuracy",
        label="CS4650 slides, biased SNLI", model=SLIDES_MODEL, corpus="SNLI 1.0 train -> test (9,824 pairs)",
        unit="accuracy (fraction of test pairs)", protocol="slides",
        source=SLIDES_SOURCE + ", 'Biased Dataset Experiment': 'Accuracy on test dataset: 59.46661237785016' "
               "(biased SNLI) and '90.45195439739413' (original SNLI)",
        values={"full": 0.9045195439739413, "biased": 0.5946661237785016},
        tolerance=0.01,
        note=SLIDES_MODEL_NOTE + " One run per arm, no control. Tolerance: 2 binomial standard errors on 9,824 "
             "pairs at the biased run's accuracy (0.0099), used for both rows.",
    ),
    Reference(
        key="slides-bias-batches", study="slides-bias", measure="train batches",
        label="CS4650 slides, biased SNLI, train loader length", model=SLIDES_DATA_ONLY,
        corpus="SNLI 1.0 train (549,367 labelled pairs, batch 32)", unit="batches of 32 pairs", protocol="slides",
        source=SLIDES_SOURCE + ", 'Biased SNLI: length of train loader: 13197', 'Original SNLI: length of train "
               "loader: 17168'",
        values={"full": 17168, "biased": 13197},
        tolerance=0.0,
        note="Counts on the full SNLI train split; BERT Lens's local data is a 19,999-pair subset, so it compares "
             "the removed share (slides-bias-removed-share), not these counts.",
    ),
    Reference(
        key="slides-bias-removed-share", study="slides-bias", measure="removed share of training pairs",
        label="CS4650 slides, biased SNLI, share of training pairs removed", model=SLIDES_DATA_ONLY,
        corpus="SNLI 1.0 train", unit="fraction of training pairs", protocol="slides",
        source=SLIDES_SOURCE + ": 1 - 13,197 / 17,168 train batches = 0.2313 (batch rounding moves it by < 0.0001)",
        values={"removed share": 1 - 13197 / 17168},
        tolerance=0.006,
        note="Derived from the two loader lengths. Tolerance: 2 standard errors of a share measured on a "
             "20,000-pair random subset of the train split (the local data).",
    ),
)



# =========================================================================================================
# Gao et al. (2021) — SimCSE
# =========================================================================================================

# Gao et al. report unsupervised SimCSE only as STS-B / SICK-R Spearman correlations (Table 1 and the
# princeton-nlp/SimCSE README). No STS data is in the offline data folder, and BERT Lens measures no STS
# correlation, so no SimCSE number is registered: the "gao" protocol is a training recipe here, compared by
# its own before/after similarity report only.



# =========================================================================================================
# bertviz on MRPC (reference 004)
# =========================================================================================================
