"""core.studies: the registry, the verdict of a study, the reproduce CLI and its chart, with a model-free study."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from core import protocols, studies
from core.__main__ import main
from core.charts import reproduce as reproduce_charts
from tests import fake_study

ISSUE_STUDIES = ("ethayarajh", "clark", "kovaleva", "hewitt-manning", "merchant", "visbert",
                 "slides-layer12", "slides-contrastive", "slides-bias", "bertviz-mrpc", "sun-aspect", "tenney")


def test_every_study_of_the_issue_is_registered_and_described():
    assert set(studies.NAMES) == set(ISSUE_STUDIES)
    for name in studies.NAMES:
        study = studies.get(name)
        assert study.name == name
        assert study.model and study.data and study.title and study.summary and study.cost_cpu and study.cost_gpu
        assert study.protocol in protocols.PROTOCOLS
        assert callable(study.run)


def test_listing_the_studies_loads_no_torch():
    code = "import sys, core.studies as s; s.all_studies(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_unknown_study_is_a_clear_error():
    with pytest.raises(ValueError, match="Unknown study 'nope'; choose one of: ethayarajh"):
        studies.get("nope")


def test_list_json_keeps_the_contract(capsys):
    assert main(["reproduce", "--list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in listed["studies"]] == list(studies.NAMES)
    for s in listed["studies"]:
        assert {"name", "model", "data", "cost_cpu", "cost_gpu", "stand_in"} <= set(s)


@pytest.mark.parametrize("shift, verdict", [(0.0, "reproduced"), (0.1, "differs")])
def test_study_verdict_is_the_worst_comparison(monkeypatch, capsys, shift, verdict):
    fake_study.install(monkeypatch)
    assert main(["reproduce", "fake", "--json", "--set", f"shift={shift}"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == verdict
    assert [c["verdict"] for c in out["comparisons"]] == [verdict, verdict]
    rows = out["comparisons"][0]["rows"]
    assert [r["measured"] - r["paper"] for r in rows] == pytest.approx([shift] * 4)


def test_other_model_gives_shape_only_and_a_readable_table(monkeypatch, capsys):
    fake_study.install(monkeypatch)
    assert main(["reproduce", "fake", "--model", "minilm"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "3/3 (100%)" in captured.err  # the study's progress reaches the terminal
    assert "DIFFERENT MODEL: SHAPE ONLY" in out
    assert "Fake paper, Figure 1 — random cosine [different model: shape only, shape r = 1.00]" in out
    assert "  shape correlation r = 1.00 over 4 shared points; too few points for r to mean much" in out


def test_a_failing_study_reports_its_error(monkeypatch, capsys):
    fake_study.install(monkeypatch)
    assert main(["reproduce", "fake", "--set", "shift=\"oops\""]) == 1
    assert "could not convert string to float" in capsys.readouterr().err
    assert main(["reproduce", "fake", "--set", "noequals"]) == 2


def test_chart_data_holds_paper_and_measured():
    result = fake_study.run(studies.StudyOptions(model="minilm", extra={"shift": 0.05}))
    frame = reproduce_charts.comparison_frame(result)
    curve = frame[frame["reference"] == "fake.curve"]
    assert curve["layer"].tolist() == [0, 1, 2, 3]
    assert (curve["measured"] - curve["paper"]).tolist() == pytest.approx([0.05] * 4)
    chart = reproduce_charts.layer_comparison_chart(result).to_dict()
    values = chart["datasets"][chart["data"]["name"]]
    paper = {v["layer"]: v["value"] for v in values if v["source"] == "paper"}
    measured = {v["layer"]: v["value"] for v in values if v["source"] == "measured (minilm)"}
    assert paper == pytest.approx(fake_study.PAPER_CURVE)
    assert measured == pytest.approx({k: v + 0.05 for k, v in fake_study.PAPER_CURVE.items()})
    bars = reproduce_charts.table_comparison_chart(result).to_dict()
    rows = bars["datasets"][bars["data"]["name"]]
    assert {(r["key"], r["source"]) for r in rows} == {("full", "paper"), ("biased", "paper"),
                                                        ("full", "measured (minilm)"), ("biased", "measured (minilm)")}


def test_a_study_result_reads_back_from_its_json():
    """A finished study's result.json rebuilds the same result (the Reproduce page after a server restart)."""
    import json

    from core import studies
    from tests import fake_study

    result = fake_study.run(studies.StudyOptions(model="other-bert", extra={"shift": 0.5}))
    again = studies.StudyResult.from_json(json.loads(json.dumps(result.to_json())))
    assert again == result
    assert again.verdict == result.verdict and again.comparisons[0].reference.values == fake_study.PAPER_CURVE
