"""core.references: overlay kinds, comparisons and verdicts against plain arithmetic; every registered
reference carries its provenance."""

from __future__ import annotations

import numpy as np
import pytest

from core import protocols, references
from core.references import Comparison, Reference, compare, overlay_kind


def _reference(**changes) -> Reference:
    fields = dict(key="test.curve", study="test", measure="random_cosine", label="Test curve", model="bert-base-cased",
                  corpus="STS", unit="WordPiece token", protocol="ethayarajh", source="a table", tolerance=0.05,
                  values={0: 0.1, 1: 0.3, 2: 0.2, 3: 0.6})
    fields.update(changes)
    return Reference(**fields)


@pytest.mark.parametrize("model, protocol, kind", [
    ("bert-base-cased", "ethayarajh", "same"),
    ("google-bert/bert-base-cased", "ethayarajh", "same"),
    ("/home/me/models_cache/hub/bert-base-cased/", "ethayarajh", "same"),
    ("BERT-BASE-CASED", "ethayarajh", "same"),
    ("bert-base-uncased", "ethayarajh", "shape"),
    ("bert-base-cased", "bertlens", "shape"),
])
def test_overlay_kind_needs_model_and_protocol(model, protocol, kind):
    assert overlay_kind(_reference(), model, protocol) == kind
    label = references.overlay_label(_reference(), model, protocol)
    assert (references.SAME_LABEL in label) == (kind == "same")
    assert (references.SHAPE_LABEL in label) == (kind == "shape")


def test_compare_reproduced_differs_and_shape():
    ref = _reference()
    close = {0: 0.12, 1: 0.27, 2: 0.24, 3: 0.58}
    far = {**close, 3: 0.70}
    assert compare(ref, close, "bert-base-cased", "ethayarajh").verdict == "reproduced"
    assert compare(ref, far, "bert-base-cased", "ethayarajh").verdict == "differs"
    assert compare(ref, close, "minilm", "ethayarajh").verdict == "different model: shape only"
    assert compare(ref, {}, "bert-base-cased", "ethayarajh").verdict == "not measured"
    # a layer the paper gives but that was not measured cannot count as reproduced
    partial = {k: v for k, v in close.items() if k != 3}
    result = compare(ref, partial, "bert-base-cased", "ethayarajh")
    assert result.verdict == "differs"
    assert [r.within for r in result.rows] == [True, True, True, None]


def test_compare_rows_and_shape_correlation_match_numpy():
    ref = _reference()
    measured = {0: 0.5, 1: 0.9, 2: 0.7, 3: 1.4, 4: 2.0}  # layer 4 is not in the paper: ignored
    result = compare(ref, measured, "x", "ethayarajh")
    paper = np.array([0.1, 0.3, 0.2, 0.6])
    mine = np.array([0.5, 0.9, 0.7, 1.4])
    assert [r.key for r in result.rows] == [0, 1, 2, 3]
    assert [r.within for r in result.rows] == list(np.abs(mine - paper) <= 0.05)
    expected = np.sum((paper - paper.mean()) * (mine - mine.mean())) / np.sqrt(
        np.sum((paper - paper.mean()) ** 2) * np.sum((mine - mine.mean()) ** 2))
    assert result.shape_correlation == pytest.approx(expected)
    assert result.to_json()["rows"][3] == {"measure": "random_cosine", "key": 3, "paper": 0.6, "measured": 1.4,
                                          "tolerance": 0.05, "within": False}


def test_register_refuses_a_duplicate_key():
    ref = _reference(key="test.duplicate-check")
    references.register(ref)
    try:
        with pytest.raises(ValueError, match="twice"):
            references.register(ref)
        assert references.get("test.duplicate-check") is ref
    finally:
        references._REGISTRY.pop("test.duplicate-check")
    with pytest.raises(KeyError, match="No reference"):
        references.get("test.duplicate-check")


def test_every_registered_reference_says_where_it_comes_from():
    import core.studies as studies

    studies.all_studies()  # studies may register references when imported
    for ref in references.all_references():
        if ref.study == "test":
            continue
        assert ref.source and ref.model and ref.corpus and ref.unit and ref.label, ref.key
        assert ref.protocol in protocols.PROTOCOLS, (ref.key, ref.protocol)
        assert ref.values, ref.key
        assert ref.tolerance >= 0, ref.key
        assert all(isinstance(k, str) or (isinstance(k, int) and k >= 0) for k in ref.values), ref.key
        assert all(np.isfinite(float(v)) for v in ref.values.values()), ref.key


def test_references_sharing_a_figure_get_distinct_titles():
    import core.studies as studies

    studies.all_studies()
    titles = [r.title for r in references.all_references() if r.study != "test"]
    assert len(titles) == len(set(titles)), sorted(t for t in titles if titles.count(t) > 1)
    assert _reference(label="Fig. 2", measure="attention to [SEP]").title == "Fig. 2 — attention to [SEP]"
    assert _reference(label="Table 1: UUAS", measure="UUAS").title == "Table 1: UUAS"


def test_slides_drug_accuracies_are_exact_fractions_of_337120_and_the_tolerance_is_two_standard_errors():
    """Seed 000 prints the drug accuracies as percentages; recover their fractions independently of the reference."""
    from fractions import Fraction
    from math import gcd, lcm, sqrt

    printed = ("58.90691741813004", "58.66961319411485")  # the slides' text, Experiment 2
    ref = references.get("slides-layer12-drugs")
    for text, value in zip(printed, ref.values.values()):
        exact = (Fraction(text) / 100).limit_denominator(1_000_000)
        assert exact.denominator == 337_120 and gcd(exact.numerator, 337_120) == 1
        assert repr(100 * exact.numerator / exact.denominator) == text  # how the SNLI ones print, too
        assert value == exact.numerator / exact.denominator
    # the other reading of the denominator: a mean over the 1,505-batch loader, last batch of 7, 14 or 28 reviews
    assert [r for r in range(1, 33) if 1_505 * lcm(32, r) == 337_120] == [7, 14, 28]
    smallest_test_set = 1_504 * 32 + 7
    low = min(ref.values.values())
    assert abs(ref.tolerance - 2 * sqrt(low * (1 - low) / smallest_test_set)) < 5e-5
    assert 2 * sqrt(low * (1 - low) / 337_120) < ref.tolerance  # the 0.0017 would be the tighter reading
    assert "337,120" in ref.note and "guess" in ref.note.lower() and "3-output" in ref.note


def test_drug_differences_mark_the_three_classes_uncertain_and_name_the_scored_split():
    from core.training.tasks import DRUG_RATING_DIFFERENCES

    text = " ".join(DRUG_RATING_DIFFERENCES)
    assert "uncertain" in text and "may be a copy" in text
    assert "validation loader" not in text and "337,120" in text


def _rise_and_fall(depth):
    return np.sin(np.pi * np.asarray(depth, dtype=float))


def test_a_shallower_model_is_compared_at_relative_depth():
    """Issue 48: a 6-layer model's layers 0..6 were set beside the 12-layer paper's layers 0..6. The same shape
    (rise to mid-depth, fall) measured on 6 layers must correlate with the paper's curve at equal relative depth:
    r over the 7 measured layers, the paper interpolated at k / 6 of its 12 layers, computed here with numpy."""
    paper = {k: float(v) for k, v in enumerate(_rise_and_fall(np.arange(13) / 12))}
    measured = {k: float(v) + 0.01 * k for k, v in enumerate(_rise_and_fall(np.arange(7) / 6))}
    ref = _reference(values=paper)
    result = compare(ref, measured, "minilm", "ethayarajh", layers=6)
    at_depth = np.interp(np.arange(7) / 6, np.arange(13) / 12, [paper[k] for k in range(13)])
    expected = np.corrcoef(at_depth, [measured[k] for k in range(7)])[0, 1]
    assert result.relative_depth and result.layers == (12, 6) and result.shape_points == 7
    assert result.shape_correlation == pytest.approx(expected) and expected > 0.99
    # the absolute layer axis the page used compared the paper's rising half with a whole rise and fall
    absolute = compare(ref, measured, "minilm", "ethayarajh")
    assert not absolute.relative_depth and absolute.shape_correlation < 0.5
    note = result.shape_note
    assert "relative depth" in note and "12" in note and "6" in note and "7 layers" in note
    assert "rise and fall together" in note
    assert Comparison.from_json(result.to_json()) == result  # read back from a finished study's result.json
    # the same depth keeps the plain comparison over the shared keys
    same = compare(ref, paper, "bert-base-cased", "ethayarajh", layers=12)
    assert not same.relative_depth and same.shape_correlation == pytest.approx(1.0) and same.shape_points == 13


def test_a_weak_or_few_point_shape_correlation_says_so():
    few = compare(_reference(), {0: 0.5, 1: 0.9, 2: 0.7, 3: 1.4}, "x", "ethayarajh")
    assert few.shape_points == 4 and "over 4 shared points" in few.shape_note
    assert "too few points" in few.shape_note
    flat = {k: float(v) for k, v in enumerate(_rise_and_fall(np.arange(13) / 12))}
    noise = {k: float(v) for k, v in enumerate(np.random.default_rng(3).normal(size=13))}
    weak = compare(_reference(values=flat), noise, "x", "ethayarajh")
    r = np.corrcoef(list(flat.values()), list(noise.values()))[0, 1]
    assert abs(r) < references.WEAK_R and weak.shape_correlation == pytest.approx(r)
    assert weak.shape_note == f"shape correlation r = {r:.2f} over 13 shared points; weak: no shared shape"
    assert compare(_reference(), {0: 1.0}, "x", "ethayarajh").shape_note == ""
