"""Every published number BERT Lens draws beside a measured one, with its provenance, in one place.

A `Reference` says which model, corpus, unit and protocol the paper measured with and where the number comes
from (file, table or figure). `overlay_kind` decides how a chart may draw it: "same" (same model and protocol:
the numbers are comparable) or "shape" (published, other model/corpus: compare the shape only). `compare`
puts measured values beside a reference and gives a plain verdict.

Sections below are one per paper; keep each reference's `source` precise enough to find the number again.
"""

from __future__ import annotations

import math
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
    layers: int = 12  # the paper model's transformer layers: every per-layer curve here is from a BERT-base

    @property
    def title(self) -> str:
        """The label, plus the measure when the label does not name it (several references share one figure)."""
        measure = self.measure.replace("_", " ")
        return self.label if measure.lower() in self.label.lower() else f"{self.label} — {measure}"

    def to_json(self) -> dict:
        return {
            "key": self.key, "study": self.study, "measure": self.measure, "label": self.label, "model": self.model,
            "corpus": self.corpus, "unit": self.unit, "protocol": self.protocol, "source": self.source,
            "values": {str(k): float(v) for k, v in self.values.items()}, "tolerance": self.tolerance,
            "layer_note": self.layer_note, "note": self.note,
        }

    @classmethod
    def from_json(cls, d: dict) -> "Reference":
        return cls(**{**{k: v for k, v in d.items() if k in cls.__dataclass_fields__}, "values": json_keyed(d["values"])})


def json_keyed(values: Mapping[str, float]) -> dict[int | str, float]:
    """A series written by to_json (keys as text) with its layer keys back as ints ("3" -> 3; "nsubj" stays)."""
    return {int(k) if k.isdigit() else k: float(v) for k, v in values.items()}


def _model_name(ref: str) -> str:
    """'bert-base-cased', 'google-bert/bert-base-cased', '/x/models_cache/hub/bert-base-cased' -> 'bert-base-cased'."""
    return ref.rstrip("/").split("/")[-1].lower()


def same_model(model: str, reference: Reference) -> bool:
    return same_model_name(model, reference.model)


def same_model_name(model: str, other: str) -> bool:
    """Whether two references name the same model (a hub id, a mirror of it, or its cached folder)."""
    return _model_name(model) == _model_name(other)


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

    @classmethod
    def from_json(cls, d: dict) -> "ComparisonRow":
        return cls(d["measure"], d["key"], d["paper"], d["measured"], d["tolerance"])


# Under these a shape correlation says little (issue 48: "shape correlation r = 0.02" stood as a finding): with few
# points any r is likely by chance, and |r| < WEAK_R is no shared shape.
FEW_SHAPE_POINTS = 5
WEAK_R = 0.5


@dataclass(frozen=True)
class Comparison:
    """rows: one per number the reference gives; kind: 'same' or 'shape'; shape_correlation: Pearson r between the
    paper's and the measured values (None under 3 points), the one thing a 'shape' overlay can be judged on, over
    shape_points points: the keys both have, or, when the measured model's depth differs from the paper's
    (`layers` = (paper's, measured) transformer layers), each measured layer against the paper's curve
    interpolated at the same relative depth (layer / number of layers). measured_layers: the whole measured
    per-layer curve (depths differ: it may run past the paper's keys), for the chart."""

    reference: Reference
    rows: tuple[ComparisonRow, ...]
    kind: OverlayKind
    verdict: Verdict
    shape_correlation: float | None
    shape_points: int = 0
    layers: tuple[int, int] | None = None
    measured_layers: Mapping[int, float] = field(default_factory=dict)

    @property
    def relative_depth(self) -> bool:
        """The paper's and the measured model's depths differ: layers are compared as layer / number of layers."""
        return self.layers is not None and self.layers[0] != self.layers[1]

    @property
    def shape_note(self) -> str:
        """The shape correlation in words, with what it is computed over and how much it can say; "" without one."""
        r, n = self.shape_correlation, self.shape_points
        if r is None:
            return ""
        over = (f"over {n} layers matched by relative depth (layer / number of layers: the paper's model has "
                f"{self.layers[0]}, this one {self.layers[1]})" if self.relative_depth else f"over {n} shared points")
        if n < FEW_SHAPE_POINTS:
            judgement = "too few points for r to mean much"
        elif abs(r) < WEAK_R:
            judgement = "weak: no shared shape"
        else:
            judgement = "the curves rise and fall together" if r > 0 else "the shapes are opposite"
        return f"shape correlation r = {r:.2f} {over}; {judgement}"

    def to_json(self) -> dict:
        return {"reference": self.reference.to_json(), "rows": [r.to_json() for r in self.rows], "kind": self.kind,
                "verdict": self.verdict, "shape_correlation": self.shape_correlation,
                "shape_points": self.shape_points, "layers": None if self.layers is None else list(self.layers),
                "measured_layers": {str(k): float(v) for k, v in self.measured_layers.items()}}

    @classmethod
    def from_json(cls, d: dict) -> "Comparison":
        layers = d.get("layers")
        return cls(Reference.from_json(d["reference"]), tuple(ComparisonRow.from_json(r) for r in d["rows"]), d["kind"],
                   d["verdict"], d["shape_correlation"], d.get("shape_points", 0),
                   None if layers is None else (int(layers[0]), int(layers[1])),
                   json_keyed(d.get("measured_layers", {})))


def _pearson(a: np.ndarray, b: np.ndarray) -> float | None:
    if len(a) < 3 or a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def _depth_matched(reference: Reference, measured: Mapping[int, float], layers: int) -> tuple[np.ndarray, np.ndarray]:
    """(paper, measured) at each measured layer whose relative depth layer / `layers` falls inside the paper's
    curve, the paper's value linearly interpolated at that depth (layer / reference.layers)."""
    keys = sorted(k for k in reference.values if isinstance(k, int))
    if len(keys) < 2:
        return np.empty(0), np.empty(0)
    depth = np.array(keys, dtype=float) / reference.layers
    values = np.array([float(reference.values[k]) for k in keys])
    mine = sorted((k / layers, float(v)) for k, v in measured.items() if depth[0] <= k / layers <= depth[-1])
    at = np.array([d for d, _ in mine])
    return np.interp(at, depth, values) if mine else np.empty(0), np.array([v for _, v in mine])


def compare(reference: Reference, measured: Mapping[int | str, float], model: str, protocol: str,
            layers: int | None = None) -> Comparison:
    """Measured values beside the paper's. Verdict: 'different model: shape only' unless model and protocol match;
    then 'reproduced' if every number the paper gives was measured and lies within the tolerance, else 'differs';
    'not measured' when none of the paper's keys was measured. layers: the measured model's transformer layers
    (a per-layer study passes it); when it differs from the paper's, the shape is compared at relative depth."""
    rows = tuple(
        ComparisonRow(reference.measure, k, float(v), None if measured.get(k) is None else float(measured[k]), reference.tolerance)
        for k, v in reference.values.items()
    )
    both = [r for r in rows if r.measured is not None]
    per_layer = {k: float(v) for k, v in measured.items() if isinstance(k, int) and v is not None}
    depths = (reference.layers, int(layers)) if layers and per_layer else None
    if depths is not None and depths[0] != depths[1]:
        paper, mine = _depth_matched(reference, per_layer, depths[1])
    else:
        paper, mine = np.array([r.paper for r in both]), np.array([r.measured for r in both])
    correlation = _pearson(paper, mine)
    kind = overlay_kind(reference, model, protocol)
    if not both:
        verdict: Verdict = "not measured"
    elif kind == "shape":
        verdict = "different model: shape only"
    else:
        verdict = "reproduced" if len(both) == len(rows) and all(r.within for r in rows) else "differs"
    return Comparison(reference, rows, kind, verdict, correlation, len(paper), depths,
                      per_layer if depths is not None else {})


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

# Figure 2 (top panel) of the paper is drawn by General_Analysis.ipynb from bert-base-uncased (uncased_L-12_H-768_A-12)
# maps on Wikipedia: two consecutive text spans per input, "[CLS] A [SEP] B [SEP]", at most 128 word pieces
# (preprocess_unlabeled.py). The notebook prints no numbers, so each layer's mean over its 12 heads was read off
# the stored output image of its "Avg. Attention Plots (Figure 2)" cell: the lines' pixel positions, the y grid
# (0.0 ... 0.8, 160 px per unit) and the x grid (layers 1-12) calibrate it; both segments meeting at a layer
# agree within 0.015. Tolerance 0.05: the read-off is good to about ±0.015, the rest allows for another corpus.
_CLARK_FIGURE2 = ("clarkkev/attention-analysis General_Analysis.ipynb, stored output image of the cell "
                  "'Avg. Attention Plots (Figure 2)' (= paper Figure 2, top): read off the line of layer means")
_CLARK_LAYERS = "Paper's layers 1-12 are BERT Lens layers 1-12 (the attention computed in transformer layer k)."
_CLARK_CORPUS = "Wikipedia, [CLS] A [SEP] B [SEP] spans, <= 128 pieces"

CLARK_CLS = Reference(
    key="clark-cls", study="clark", measure="attention to [CLS]", label="Clark et al. 2019, Fig. 2",
    model="bert-base-uncased", corpus=_CLARK_CORPUS, unit="mean attention mass per query, averaged over heads",
    protocol="clark", source=_CLARK_FIGURE2,
    values={1: 0.06, 2: 0.26, 3: 0.24, 4: 0.14, 5: 0.02, 6: 0.01, 7: 0.01, 8: 0.01, 9: 0.01, 10: 0.02, 11: 0.02, 12: 0.01},
    tolerance=0.05, layer_note=_CLARK_LAYERS, note="Read off a figure: two decimals at best.",
)
CLARK_SEP = Reference(
    key="clark-sep", study="clark", measure="attention to [SEP]", label="Clark et al. 2019, Fig. 2",
    model="bert-base-uncased", corpus=_CLARK_CORPUS,
    unit="mean attention mass per query on both [SEP]s, averaged over heads", protocol="clark", source=_CLARK_FIGURE2,
    values={1: 0.03, 2: 0.05, 3: 0.08, 4: 0.21, 5: 0.49, 6: 0.55, 7: 0.54, 8: 0.57, 9: 0.57, 10: 0.48, 11: 0.06, 12: 0.07},
    tolerance=0.05, layer_note=_CLARK_LAYERS,
    note="Read off a figure. The paper's text: over half of the attention in layers 6-10 goes to [SEP].",
)
CLARK_PUNCT = Reference(
    key="clark-punct", study="clark", measure="attention to periods and commas", label="Clark et al. 2019, Fig. 2",
    model="bert-base-uncased", corpus=_CLARK_CORPUS,
    unit="mean attention mass per query on '.' and ',' tokens, averaged over heads", protocol="clark",
    source=_CLARK_FIGURE2,
    values={1: 0.07, 2: 0.11, 3: 0.09, 4: 0.08, 5: 0.05, 6: 0.05, 7: 0.05, 8: 0.06, 9: 0.05, 10: 0.08, 11: 0.51, 12: 0.58},
    tolerance=0.05, layer_note=_CLARK_LAYERS, note="Read off a figure: two decimals at best.",
)

# Table 1: Syntax_Analysis.ipynb's cell "Compare the best attention head to baselines ... This produces the scores
# in Table 1", whose stored output lists every relation with >= 100 dependents in WSJ Penn Treebank dev (Stanford
# Dependencies) with bert-base-uncased: best head (his 0-based layer-head, over both directions), its accuracy, the
# best offset in -3..+2 and its accuracy. Only relations that UD English EWT (the offline stand-in) annotates the
# same way are kept here (UD names in core.studies.clark.UD_TO_SD); left out: prep/pobj/possessive (UD attaches
# case markers to the noun), cc/conj (UD v2 attaches cc to the following conjunct), neg, number, quantmod, pcomp,
# partmod, dep, and the 'all' row (34.7 vs 26.7), which mixes in every convention difference.
_CLARK_TABLE1 = ("clarkkev/attention-analysis Syntax_Analysis.ipynb, stored output of the cell that 'produces the "
                 "scores in Table 1' (paper Table 1 shows a subset of these rows)")
_CLARK_TABLE1_ROWS = {
    # relation: (count, best accuracy %, his 0-based layer-head, direction, baseline offset, baseline accuracy %)
    "det": (3337, 94.3, "7-10", "dep->head", 1, 51.7),
    "nn": (3192, 70.4, "3-9", "dep->head", 1, 70.2),
    "nsubj": (2804, 58.5, "7-1", "dep->head", 1, 45.5),
    "amod": (2505, 75.6, "3-9", "dep->head", 1, 68.3),
    "dobj": (1591, 86.8, "7-9", "dep->head", -2, 40.0),
    "advmod": (1241, 48.8, "6-5", "dep->head", 1, 40.2),
    "aux": (1237, 81.1, "3-9", "dep->head", 1, 71.5),
    "num": (1091, 67.4, "7-10", "dep->head", 1, 56.4),
    "poss": (708, 80.5, "6-5", "dep->head", 1, 47.7),
    "ccomp": (557, 48.8, "7-0", "dep->head", -2, 12.4),
    "xcomp": (433, 57.3, "4-6", "dep->head", -2, 47.1),
    "mark": (420, 50.7, "7-1", "dep->head", 2, 14.5),
    "cop": (353, 72.2, "6-5", "dep->head", 1, 40.5),
    "auxpass": (286, 94.1, "3-9", "dep->head", 1, 82.5),
    "rcmod": (286, 40.9, "8-10", "dep->head", -3, 26.6),
    "advcl": (285, 29.5, "4-3", "dep->head", -3, 4.6),
    "appos": (272, 30.5, "6-0", "dep->head", -3, 28.3),
    "nsubjpass": (254, 57.5, "6-5", "dep->head", 2, 43.7),
    "tmod": (243, 45.7, "7-5", "dep->head", -1, 29.2),
    "npadvmod": (186, 44.6, "1-5", "head<-dep", -2, 34.9),
    "prt": (116, 99.1, "5-6", "dep->head", -1, 91.4),
}


def _one_based(layer_head: str) -> str:
    layer, head = (int(x) for x in layer_head.split("-"))
    return f"{layer + 1}-{head + 1}"


# The paper's names for the best heads (1-based), e.g. det 8-11, dobj 8-10, poss 7-6, auxpass 4-10.
CLARK_BEST_HEADS = {rel: _one_based(row[2]) for rel, row in _CLARK_TABLE1_ROWS.items()}
_CLARK_SYNTAX_NOTE = ("Per relation, the best of 144 heads x 2 directions; every word scored (a root is a miss); "
                      "poss scored through a following 's. Best heads, paper numbering (from 1): "
                      + ", ".join(f"{r} {h}" for r, h in CLARK_BEST_HEADS.items()) + ". Relation names are "
                      "Stanford Dependencies'; UD stand-in relations are renamed to them before comparing.")
CLARK_SYNTAX = Reference(
    key="clark-syntax-best-head", study="clark", measure="best head accuracy per relation",
    label="Clark et al. 2019, Table 1", model="bert-base-uncased",
    corpus="WSJ Penn Treebank dev, Stanford Dependencies", unit="share of dependents whose predicted head is the gold head",
    protocol="clark", source=_CLARK_TABLE1, values={r: row[1] / 100 for r, row in _CLARK_TABLE1_ROWS.items()},
    tolerance=0.05, note=_CLARK_SYNTAX_NOTE + " Tolerance 0.05: a relation with a few hundred dependents has a "
    "sampling spread of about ±0.03, and the stand-in treebank differs in genre and annotation.",
)
CLARK_BASELINE = Reference(
    key="clark-syntax-baseline", study="clark", measure="fixed-offset baseline per relation",
    label="Clark et al. 2019, Table 1", model="bert-base-uncased",
    corpus="WSJ Penn Treebank dev, Stanford Dependencies", unit="share of dependents whose head is at the best offset in -3..+2",
    protocol="clark", source=_CLARK_TABLE1, values={r: row[5] / 100 for r, row in _CLARK_TABLE1_ROWS.items()},
    tolerance=0.05, note="Best offsets: " + ", ".join(f"{r} {row[4]:+d}" for r, row in _CLARK_TABLE1_ROWS.items())
    + ". The baseline needs no model: it measures how alike the two treebanks are.",
)
register(CLARK_CLS, CLARK_SEP, CLARK_PUNCT, CLARK_SYNTAX, CLARK_BASELINE)

# Section 6 draws a map (Figure 6) and states: "heads within the same layer are often fairly close to each other";
# encoded as a claim on the Jensen-Shannon distances behind the map.
CLARK_HEAD_LAYERS = Reference(
    key="clark-head-layers", study="clark", measure="heads of one layer are closer than heads of different layers",
    label="Clark et al. 2019, section 6 / Fig. 6", model="bert-base-uncased", corpus="Wikipedia spans",
    unit="claim (1 = holds: mean JS distance between heads of the same layer < between heads of different layers)",
    protocol="clark",
    source="Clark et al. 2019, section 6 (head_distances.py: Jensen-Shannon divergence summed over tokens; "
           "sklearn MDS): 'heads within the same layer are often fairly close to each other'",
    values={"claim": 1.0}, tolerance=0.0,
    note="Measured only with the study option head_map=N (N inputs); the two mean distances are reported beside it.",
)
register(CLARK_HEAD_LAYERS)


# =========================================================================================================
# Kovaleva et al. (2019) — Revealing the Dark Secrets of BERT
# =========================================================================================================

# The paper gives no per-layer numbers for the change (Figure 5 is a heatmap per task), only the claim, so it is
# encoded as a claim: 1 when the two layers with the lowest mean cosine between the pretrained and the fine-tuned
# model's maps are the last two (core.analyses.heads.last_layers_change_most), 0 otherwise.
KOVALEVA_LAST_TWO = Reference(
    key="kovaleva-last-two-layers", study="kovaleva", measure="the last two layers change most after fine-tuning",
    label="Kovaleva et al. 2019, Fig. 5", model="bert-base-uncased",
    corpus="GLUE dev sets (MRPC, STS-B, SST-2, QQP, RTE, QNLI, MNLI)",
    unit="claim (1 = holds: the two lowest per-layer mean cosines are the last two layers)", protocol="bertlens",
    source="Kovaleva et al. 2019, section 4.3 and Figure 5 (cosine of flattened per-head maps, pretrained vs "
           "fine-tuned, averaged over the dev set); /work/shared/references/003: 'fine-tuning has the largest "
           "impact on the final 2 layers'",
    values={"claim": 1.0}, tolerance=0.0,
    note="A qualitative claim, not a number; per-layer change (1 - mean cosine) is reported beside it.",
)
register(KOVALEVA_LAST_TWO)

# Figure 7 is a bar chart per task with no numbers in the text either; its claim: in the last layer, the
# fine-tuned model's [CLS] attends to [SEP] more than to [CLS], punctuation or the other tokens together.
KOVALEVA_CLS_SEP = Reference(
    key="kovaleva-cls-sep", study="kovaleva", measure="last-layer [CLS] attends most to [SEP] after fine-tuning",
    label="Kovaleva et al. 2019, Fig. 7", model="bert-base-uncased",
    corpus="GLUE dev sets (MRPC, STS-B, SST-2, QQP, RTE, QNLI, MNLI)",
    unit="claim (1 = holds: [SEP] has the largest mean share of the last layer's [CLS] row, over heads and inputs)",
    protocol="bertlens",
    source="Kovaleva et al. 2019, section 4.4 and Figure 7 (last-layer [CLS] attention to [CLS], [SEP], "
           "punctuation and other tokens); /work/shared/references/003: 'For majority tasks, [SEP] gets attended "
           "the most'",
    values={"claim": 1.0}, tolerance=0.0,
    note="A qualitative claim for most (not all) tasks; the four shares are reported beside it.",
)
register(KOVALEVA_CLS_SEP)


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
# Tenney, Das & Pavlick (2019) — BERT rediscovers the classical NLP pipeline
# =========================================================================================================

# The paper's expected layers come from edge probing with a scalar mix on OntoNotes and other data sets, none of
# them offline here; its finding, the order of the pipeline, is what the tenney study checks.
register(
    Reference(
        key="tenney.pos-below-dependencies", study="tenney", measure="part of speech below dependencies",
        label="Tenney et al. (2019): part of speech is learnt at lower layers than dependencies",
        model="bert-large-uncased", corpus="OntoNotes 5.0 (POS) and English Web Treebank (dependencies)",
        unit="1 = yes: the expected layer of upos is below that of deprel; 0 = no",
        protocol="edge-probing",  # the paper's probe, which BERT Lens does not run: never "same", always the shape
        source="Tenney, Das & Pavlick (2019), ACL, abstract: 'the regions responsible for each step appear in the "
               "expected sequence: POS tagging, parsing, NER, semantic roles, then coreference' (expected layer, "
               "Table 1)",
        values={"part of speech below dependencies": 1.0}, tolerance=0.0,
        note="A qualitative finding encoded as yes/no. The paper's model is BERT-large with edge probes over a "
             "scalar mix; any other model or probe compares the order only (shape only).",
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
# Experiment 2's accuracies as exact fractions (Fraction(printed / 100).limit_denominator recovers them; the
# reference note says what 337,120 may count). The tolerance assumes the smaller of the two candidate test sizes.
SLIDES_DRUG_DENOMINATOR = 337_120
SLIDES_DRUG_CORRECT = {SLIDES_ALL_LAYERS: 198_587, SLIDES_MINUS_LAST: 197_787}
SLIDES_DRUG_TEST_REVIEWS = {"if 337,120 counts reviews": 337_120, "if a mean over 1,505 batches (smallest)": 48_135}
SLIDES_DRUG_TOLERANCE = round(2 * math.sqrt(0.5867 * (1 - 0.5867) / min(SLIDES_DRUG_TEST_REVIEWS.values())), 4)

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
        corpus="drug reviews with WebMD's columns (Age, Condition, ..., Satisfaction; 'MedWeb' in the slides; "
               "7,021 train / 1,505 validation batches); label 'satisfaction level (1,2,3,4,5,6)'",
        unit="accuracy (fraction of test reviews)", protocol="slides",
        source=SLIDES_SOURCE + ", Experiment 2: 'Accuracy on test dataset: 58.90691741813004' (original BERT) and "
               "'58.66961319411485' (BERT w/o Layer 12)",
        values={SLIDES_ALL_LAYERS: SLIDES_DRUG_CORRECT[SLIDES_ALL_LAYERS] / SLIDES_DRUG_DENOMINATOR,
                SLIDES_MINUS_LAST: SLIDES_DRUG_CORRECT[SLIDES_MINUS_LAST] / SLIDES_DRUG_DENOMINATOR},
        tolerance=SLIDES_DRUG_TOLERANCE,
        note=SLIDES_MODEL_NOTE + " Known: both printed accuracies are exactly 100 x k / 337,120 in lowest terms "
             "(k = 198,587 and 197,787), computed the way the SNLI ones are (100 x k / 9,824). A guess: what "
             "337,120 counts. Either 337,120 test reviews (then the test split is 1.5 times the training split, "
             "at most 224,672 reviews in 7,021 batches of 32), or 337,120 = 1,505 x 224 with 224 = lcm(32, 7): "
             "the mean of per-batch accuracies over 1,505 batches of 32 whose last batch holds 7, 14 or 28 "
             "reviews (as the Hugging Face tutorial the slides' AdamW call comes from averages its accuracy), "
             "i.e. about 48,140 reviews in a loader as long as their validation loader. Tolerance: 2 binomial "
             "standard errors at the smaller size, 48,135 reviews (0.0045; 0.0017 at 337,120). Unknown too: the "
             "number of classes. The text says satisfaction levels 1-6 (WebMD shows 1-5 stars) while the printed "
             "module tree has a 3-output classifier, identical to the SNLI printout and perhaps copied from it. "
             "BERT Lens's drug tasks use Druglib (a different corpus and label), so these numbers are a shape to "
             "compare, never a target.",
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

# Reference 004 looks at bert-base-uncased (its code: BertModel.from_pretrained('bert-base-uncased')) with
# bertviz's model view on two MRPC pairs and the "Sentence A -> Sentence B" filter (jessevig/bertviz
# model_view.py: attention[:, :, :sentence_b_start, sentence_b_start:], raw weights; layers and heads labelled
# from 0). It states no numbers; its two checkable statements are encoded as claims (1 = holds).
_BERTVIZ_SOURCE = "/work/shared/references/004 (Biweekly Report 3, 'Visualizing BERT attention', J. Watts)"
SLIDES_FREEZE_LAST = "12 layers, layer 12 frozen, linear head"
SLIDES_FREEZE_FASTER = Reference(
    key="slides-freeze12-faster", study="slides-layer12",
    measure="freezing the last layer trains faster than training all layers",
    label="CS4650 slides, freeze layer 12", model=SLIDES_MODEL, corpus="SNLI 1.0 / drug reviews",
    unit="claim (1 = holds: train seconds with the last layer frozen < train seconds with all layers trained)",
    protocol="slides", source=SLIDES_SOURCE + ", conclusion: 'We used Hugging Face to freeze layer 12 and found out "
    "there is no much difference compare to the original BERT but the process is much faster'",
    values={"claim": 1.0}, tolerance=0.0,
    note="The slides give no numbers for the frozen run (no accuracy, no time), only this sentence; 'no much "
         "difference' in accuracy is reported beside it, not judged. On a shared processor timings are noisy.",
)
register(SLIDES_FREEZE_FASTER)


BERTVIZ_TWIN = Reference(
    key="bertviz-mrpc-twin", study="bertviz-mrpc",
    measure="equivalent pairs: more A→B attention to the same word than non-equivalent pairs",
    label="bertviz on MRPC (report 004)", model="bert-base-uncased", corpus="MRPC (two pairs viewed)",
    unit="claim (1 = holds: mean over all heads of A→B same-piece attention is higher on equivalent pairs)",
    protocol="bertlens", source=_BERTVIZ_SOURCE + ": 'Since these sentences are semantically equivalent, there "
    "are more these connections [between words with equivalent meaning] in this visualization than the previous one'",
    values={"claim": 1.0}, tolerance=0.0,
    note="Measured over many pairs instead of two; 'the same word' is the same word piece.",
)
BERTVIZ_DEEPER = Reference(
    key="bertviz-mrpc-deeper", study="bertviz-mrpc", measure="A→B attention grows with the layer",
    label="bertviz on MRPC (report 004)", model="bert-base-uncased", corpus="MRPC (two pairs viewed)",
    unit="claim (1 = holds: Spearman correlation of layer and mean A→B attention mass is positive)",
    protocol="bertlens", source=_BERTVIZ_SOURCE + ": 'the attention layers show stronger connections as the "
    "layer number increases' (Sentence A -> Sentence B view)",
    values={"claim": 1.0}, tolerance=0.0,
    note="A→B mass includes the final [SEP], which bertviz's A→B slice contains.",
)
register(BERTVIZ_TWIN, BERTVIZ_DEEPER)

# =========================================================================================================
# "What does a fine-tuned BERT model look at?" — the aspect-sentiment blog (reference 002)
# =========================================================================================================
# The blog gives no numbers: it names heads it saw in bertviz on a bert-base-uncased fine-tuned on Sun et al.
# 2019's QA-M task (SemEval-14). Its heads are bertviz's labels, layer-head counted from 0 ("9-0" has a head 0).
# Each claim is measured as "the head ranks in the top 10 % of heads on the role's attention mass and beats the
# uniform baseline" (core.analyses.aspect_sentiment.TOP_SHARE).
_SUN_SOURCE = "/work/shared/references/002 (blog 'What does a Fine-tuned BERT model look at ?')"
_SUN_RULE = ("1 = holds: the head ranks in the top 10 % of all heads by the aspect word's mean attention mass on "
             "these tokens and is above the uniform baseline")
_SUN_NOTE = "The blog names heads it saw in a few bertviz pictures; the 10 % bar is BERT Lens's, not the blog's."


def _sun_claim(key: str, measure: str, unit: str, quote: str, note: str = _SUN_NOTE) -> Reference:
    return Reference(key=key, study="sun-aspect", measure=measure, label="Fine-tuned BERT on aspect sentiment (blog 002)",
                     model="bert-base-uncased", corpus="SemEval-14 restaurants as Sun et al. QA-M", unit=unit,
                     protocol="bertlens", source=f"{_SUN_SOURCE}: {quote}", values={"claim": 1.0}, tolerance=0.0,
                     layer_note="bertviz numbering, layer-head from 0 (its layer 9 is layer 10 on BERT Lens's charts)", note=note)


SUN_ASPECT_HEAD = _sun_claim(
    "sun-aspect-9-8", "head 9-8 is an aspect head (question's aspect word -> review's aspect term)",
    f"claim ({_SUN_RULE}: the aspect term)",
    "'head 9-8 mostly attends to the aspect related words in the review, that correspond to the aspect in the question'")
SUN_SENTIMENT_HEAD = _sun_claim(
    "sun-aspect-9-0", "head 9-0 is an aspect-sentiment head (aspect word -> sentiment words)",
    f"claim ({_SUN_RULE}: sentiment-lexicon words)",
    "'head 9-0 mostly focusing on aspects words that are related to the question and their corresponding sentiment "
    "words'", _SUN_NOTE + " Sentiment words: core/data/sentiment_lexicon.tsv (VADER subset, MIT).")
SUN_OPPOSITE_HEAD = _sun_claim(
    "sun-aspect-10-3", "head 10-3 attends to the other aspect (aspect word -> the other category's terms)",
    f"claim ({_SUN_RULE}: the terms of the category the review names when another is asked)",
    "'the head 10-3 was focussing mostly on the other aspect and their related words that are not available in the "
    "question'", _SUN_NOTE + " Measured on one-category reviews asked about another category: SemEval-14 does not "
    "say which category a term of a two-category review belongs to.")
SUN_ABSENT_SEP = _sun_claim(
    "sun-aspect-absent-sep", "an absent aspect's attention goes to [SEP] (aspect head 9-8)",
    "claim (1 = holds: at head 9-8 the aspect word of an absent aspect puts more mass on [SEP] than that of a "
    "present one)",
    "'When there is no mention of a given aspect in the review. Head focuses on [SEP] token.'",
    "The blog does not name its no-op heads; its aspect head 9-8 is the one that must look elsewhere when the "
    "aspect is absent, so it is the one checked.")
register(SUN_ASPECT_HEAD, SUN_SENTIMENT_HEAD, SUN_OPPOSITE_HEAD, SUN_ABSENT_SEP)
