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

_HM_LAYERS = (
    "The paper's 'BERTbase7' is index 7 of the 12 encoder outputs their extraction stores "
    "(scripts/convert_raw_to_bert.py: LAYER_COUNT = 12 from pytorch_pretrained_bert's encoded_layers, which "
    "leave out the embedding layer; README: 'BERT-base models have layers 0 through 11'), i.e. the output of "
    "transformer layer 8: BERT Lens layer 8."
)
_HM_SOURCE = (
    "Hewitt & Manning (2019), NAACL, Table 1, row BERTBASE7 (best BERT-base layer; probe of rank 768 as "
    "john-hewitt/structural-probes example/config/naacl19/bert-base/ptb-prd-BERTbase7.yaml, maximum_rank 768)"
)
_HM_NOTE = (
    "PTB WSJ with Stanford Dependencies is not available offline; the hewitt-manning study runs on UD English "
    "EWT, so even on bert-base-cased with this protocol the comparison is indicative. The paper's per-layer "
    "curves (its figure of UUAS/DSpr by layer) are not included: no per-layer numbers are given in the paper's "
    "text or in the repository."
)

register(
    Reference(
        key="hewitt-manning.uuas", study="hewitt-manning", measure="UUAS",
        label="Hewitt & Manning (2019), BERT-base layer 7", model="bert-base-cased",
        corpus="Penn Treebank WSJ test, Stanford Dependencies",
        unit="undirected unlabelled attachment score (0-1), PTB punctuation tags left out",
        protocol="hewitt-manning", source=_HM_SOURCE, values={8: 0.798}, tolerance=0.02,
        layer_note=_HM_LAYERS, note=_HM_NOTE,
    ),
    Reference(
        key="hewitt-manning.dspr", study="hewitt-manning", measure="DSpr",
        label="Hewitt & Manning (2019), BERT-base layer 7", model="bert-base-cased",
        corpus="Penn Treebank WSJ test, Stanford Dependencies",
        unit="distance Spearman, mean over sentence lengths 5-50",
        protocol="hewitt-manning", source=_HM_SOURCE, values={8: 0.85}, tolerance=0.02,
        layer_note=_HM_LAYERS, note=_HM_NOTE,
    ),
)


# =========================================================================================================
# Merchant et al. (2020) — What happens to BERT embeddings during fine-tuning?
# =========================================================================================================

# The paper gives its RSA per layer only as figures, so no per-layer number is registered; its finding is.
register(
    Reference(
        key="merchant.top-layers-change-most", study="merchant", measure="top layers change most",
        label="Merchant et al. (2020): fine-tuning primarily affects the top layers",
        model="BERT-base and its copies fine-tuned on MNLI, SQuAD and dependency parsing",
        corpus="each task's own data",
        unit="1 = yes: the least similar layer (lowest RSA to the pre-trained model) is in the top third and the "
             "top third's mean RSA is below the bottom third's; 0 = no",
        protocol="merchant",
        source="Merchant, Rahimtoroghi, Pavlick & Tenney (2020), BlackboxNLP, abstract: 'fine-tuning primarily "
               "affects the top layers of BERT, but with noteworthy variation across tasks. In particular, "
               "dependency parsing reconfigures most of the model'",
        values={"top layers change most": 1.0}, tolerance=0.0,
        note="A qualitative finding encoded as yes/no, not a number read off a figure; it does not hold for their "
             "dependency-parsing model. Never 'same model': the fine-tuned copies differ from any run here.",
    ),
)


# =========================================================================================================
# van Aken et al. (2019) — VisBERT
# =========================================================================================================

# No reference: VisBERT shows per-layer PCA pictures and reports no per-layer numbers (explained variance or
# otherwise), so the visbert study reports what it measures and says so.


# =========================================================================================================
# CS4650 slides (Ge & Zhu) — layer-12 removal, contrastive learning, biased SNLI
# =========================================================================================================


# =========================================================================================================
# Gao et al. (2021) — SimCSE
# =========================================================================================================


# =========================================================================================================
# bertviz on MRPC (reference 004)
# =========================================================================================================
