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
# Every number is from the authors' repository, github.com/kawine/contextual at commit c10c992 (2020-04-29).
# His preprocess.py embeds STS 2012-16 sentences with bert-base-CASED (BertBaseCased: do_lower_case=False),
# keeps WordPiece tokens without [CLS]/[SEP], and stacks the input embeddings first, so his "layer_0" is BERT
# Lens's layer 0: no shift. The README's FAQ warns that these files are "close to what is charted in the paper,
# though not an exact match", and that they are not adjusted for anisotropy (the paper's Figures plot the
# differences computed in visualize.py, registered below as the adjusted_* references).

_ETHAYARAJH_STATS = "kawine/contextual, bert/embedding_space_stats.json"
_ETHAYARAJH_COMMON = dict(
    study="ethayarajh", model="bert-base-cased", corpus="STS 2012-16 sentences", unit="WordPiece token",
    protocol="ethayarajh", layer_note="The file's layer_0 is the input embeddings (preprocess.py stacks them first): "
    "same numbering as BERT Lens.",
)
# Key "mean cosine similarity across words": 1,000 sampled sentences, one token each, 1,000 random pairs.
_ETHAYARAJH_RANDOM = {0: 0.105, 1: 0.168, 2: 0.219, 3: 0.245, 4: 0.327, 5: 0.377, 6: 0.420, 7: 0.398, 8: 0.399,
                      9: 0.484, 10: 0.561, 11: 0.675, 12: 0.477}
# Key "mean cosine similarity between sentence and words": the same 1,000 sentences.
_ETHAYARAJH_INTRA = {0: 0.435, 1: 0.522, 2: 0.570, 3: 0.590, 4: 0.642, 5: 0.695, 6: 0.726, 7: 0.711, 8: 0.720,
                     9: 0.771, 10: 0.820, 11: 0.870, 12: 0.776}
# Key "variance explained for random words" (TruncatedSVD on the 1,000 sampled tokens).
_ETHAYARAJH_MEV_RANDOM = {0: 0.039, 1: 0.025, 2: 0.017, 3: 0.012, 4: 0.014, 5: 0.012, 6: 0.012, 7: 0.010,
                          8: 0.012, 9: 0.015, 10: 0.022, 11: 0.040, 12: 0.009}
# bert/self_similarity.csv: column means over its 8,159 token types (visualize_self_similarity's y1).
_ETHAYARAJH_SELF = {0: 0.9544, 1: 0.9210, 2: 0.8710, 3: 0.8232, 4: 0.7984, 5: 0.7814, 6: 0.7653, 7: 0.7439,
                    8: 0.7314, 9: 0.7535, 10: 0.7815, 11: 0.8386, 12: 0.7548}
# bert/variance_explained.csv: column means over the same 8,159 types (visualize_variance_explained's y1);
# his code writes no layer 0 ("we don't expect the input embeddings to be the same at all for gpt2/bert").
_ETHAYARAJH_MEV = {1: 0.0096, 2: 0.0150, 3: 0.0199, 4: 0.0226, 5: 0.0244, 6: 0.0251, 7: 0.0281, 8: 0.0286,
                   9: 0.0256, 10: 0.0229, 11: 0.0256, 12: 0.0395}


def _minus(a: Mapping[int, float], b: Mapping[int, float]) -> dict[int, float]:
    return {k: round(a[k] - b[k], 4) for k in a if k in b}


_MEV_NOTE = (
    "Caution: analyze.variance_explained_by_pc computes each value with sklearn's PCA(n_components=1), which "
    "centres; for a word with n occurrences that share is at least 1/(n-1): 0.25 at the minimum n = 5, above 0.05 "
    "for any n <= 21. Yet 76% of the CSV's 8,159 rows stay below 0.05 at every layer, which would need more than "
    "21 occurrences for three types in four, implausible when most types sit near the min_count of 5. The CSV "
    "does not look like the output of the published code, so a faithful run (BERT Lens follows the code) lands "
    "well above these numbers; compare the shape only."
)

register(
    Reference(
        key="ethayarajh.random_cosine", measure="random_cosine",
        label="Ethayarajh 2019: mean cosine of random words",
        source=f"{_ETHAYARAJH_STATS}, key \"mean cosine similarity across words\" (analyze.explore_embedding_space; "
        "visualize.visualize_embedding_space plots it)",
        values=_ETHAYARAJH_RANDOM, tolerance=0.02,
        note="Tolerance: the spread of a 1,000-pair estimate (about ±0.01) plus the file's 3-decimal rounding.",
        **_ETHAYARAJH_COMMON,
    ),
    Reference(
        key="ethayarajh.intra_sentence", measure="intra_sentence",
        label="Ethayarajh 2019: intra-sentence similarity",
        source=f"{_ETHAYARAJH_STATS}, key \"mean cosine similarity between sentence and words\"",
        values=_ETHAYARAJH_INTRA, tolerance=0.02, **_ETHAYARAJH_COMMON,
    ),
    Reference(
        key="ethayarajh.self_similarity", measure="self_similarity",
        label="Ethayarajh 2019: self-similarity",
        source="kawine/contextual, bert/self_similarity.csv, mean of each layer_N column over its 8,159 rows "
        "(computed here, as visualize.visualize_self_similarity does)",
        values=_ETHAYARAJH_SELF, tolerance=0.02,
        note="Per-word values in the CSV are rounded to 3 decimals; each is a mean over at most 1,000 sampled pairs.",
        **_ETHAYARAJH_COMMON,
    ),
    Reference(
        key="ethayarajh.mev_random", measure="mev_random",
        label="Ethayarajh 2019: variance explained for random words",
        source=f"{_ETHAYARAJH_STATS}, key \"variance explained for random words\"",
        values=_ETHAYARAJH_MEV_RANDOM, tolerance=0.01, **_ETHAYARAJH_COMMON,
    ),
    Reference(
        key="ethayarajh.mev", measure="mev",
        label="Ethayarajh 2019: maximum explainable variance",
        source="kawine/contextual, bert/variance_explained.csv, mean of each layer_N column over its 8,159 rows "
        "(computed here, as visualize.visualize_variance_explained does)",
        values=_ETHAYARAJH_MEV, tolerance=0.01, note=_MEV_NOTE, **_ETHAYARAJH_COMMON,
    ),
    Reference(
        key="ethayarajh.adjusted_self_similarity", measure="adjusted_self_similarity",
        label="Ethayarajh 2019: self-similarity, anisotropy-adjusted",
        source="derived: kawine/contextual bert/self_similarity.csv column means minus embedding_space_stats.json "
        "\"mean cosine similarity across words\" (visualize.visualize_self_similarity, the paper's "
        "'Average Self-Similarity (anisotropy-adjusted)' chart)",
        values=_minus(_ETHAYARAJH_SELF, _ETHAYARAJH_RANDOM), tolerance=0.03, **_ETHAYARAJH_COMMON,
    ),
    Reference(
        key="ethayarajh.adjusted_intra_sentence", measure="adjusted_intra_sentence",
        label="Ethayarajh 2019: intra-sentence similarity, anisotropy-adjusted",
        source=f"derived: {_ETHAYARAJH_STATS}, \"mean cosine similarity between sentence and words\" minus "
        "\"mean cosine similarity across words\" (visualize.visualize_embedding_space, the paper's "
        "'Average Intra-Sentence Similarity (anisotropy-adjusted)' chart)",
        values=_minus(_ETHAYARAJH_INTRA, _ETHAYARAJH_RANDOM), tolerance=0.03, **_ETHAYARAJH_COMMON,
    ),
    Reference(
        key="ethayarajh.adjusted_mev", measure="adjusted_mev",
        label="Ethayarajh 2019: MEV, anisotropy-adjusted",
        source="derived: kawine/contextual bert/variance_explained.csv column means minus embedding_space_stats.json "
        "\"variance explained for random words\" (visualize.visualize_variance_explained, the paper's "
        "'Average Maximum Explainable Variance (anisotropy-adjusted)' chart)",
        values=_minus(_ETHAYARAJH_MEV, _ETHAYARAJH_MEV_RANDOM), tolerance=0.015, note=_MEV_NOTE,
        **_ETHAYARAJH_COMMON,
    ),
)



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


# =========================================================================================================
# Gao et al. (2021) — SimCSE
# =========================================================================================================


# =========================================================================================================
# bertviz on MRPC (reference 004)
# =========================================================================================================
