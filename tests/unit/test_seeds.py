"""Seeds as a dimension of a study (core.studies.seeds): the seeds parsed with clear messages, intervals against
scipy, the interval verdict on constructed values, the summary of per-seed results, and `reproduce --seeds` whose
per-seed entries equal single-seed runs (the model-free fake study)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from core import studies
from core.__main__ import main
from core.studies import seeds
from tests import fake_study


@pytest.mark.parametrize("text, message", [
    ("", "empty"), (" , ", "empty"), ("a,b", "'a' is not a whole number"), ("0,1.5", "'1.5' is not a whole number"),
    ("1,2,1", "1 is given twice"), ("-1,2", "-1 is negative"), ("3", r"one seed \(3\) gives no interval; give two or more, or for one run use --seed"),
])
def test_bad_seeds_get_a_clear_message(text, message):
    with pytest.raises(ValueError, match=message):
        seeds.parse_seeds(text)


def test_seeds_are_parsed_in_order():
    assert seeds.parse_seeds(" 2, 0,11 ") == (2, 0, 11)


@pytest.mark.parametrize("values", [[0.31, 0.35, 0.28], [1.0, 2.0], [0.5, 0.52, 0.49, 0.55, 0.47]])
def test_t_interval_is_scipy_student_t_over_the_seeds(values):
    expected = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert seeds.interval(values, "t") == pytest.approx(expected, abs=1e-12)


def test_bootstrap_interval_is_scipy_percentile_bootstrap_of_the_mean():
    values = [0.61, 0.58, 0.66, 0.59]
    found = stats.bootstrap((np.array(values),), np.mean, confidence_level=0.95, n_resamples=9999,
                            method="percentile", rng=np.random.default_rng(0)).confidence_interval
    low, high = seeds.interval(values, "bootstrap")
    assert (low, high) == pytest.approx((found.low, found.high))
    assert min(values) <= low < np.mean(values) < high <= max(values)


def test_equal_values_give_a_point_interval_and_one_value_none():
    assert seeds.interval([0.4, 0.4, 0.4], "t") == (0.4, 0.4)
    with pytest.raises(ValueError, match="two or more"):
        seeds.interval([0.4], "t")
    with pytest.raises(ValueError, match="unknown interval"):
        seeds.interval([0.4, 0.5], "jackknife")


@pytest.mark.parametrize("low, high, verdict", [
    (0.49, 0.51, "reproduced"),     # inside the band [0.48, 0.52]
    (0.48, 0.52, "reproduced"),     # the band's edges count as inside
    (0.53, 0.60, "differs"),        # wholly above
    (0.30, 0.47, "differs"),        # wholly below
    (0.50, 0.55, "inconclusive"),   # straddles the upper edge
    (0.40, 0.60, "inconclusive"),   # wider than the band
])
def test_verdict_is_made_on_the_interval(low, high, verdict):
    assert seeds.interval_verdict(low, high, paper=0.50, tolerance=0.02) == verdict


def _fake(seed, **extra):
    return fake_study.run(studies.StudyOptions(seed=seed, extra=extra))


def test_summary_per_number_and_head():
    results = [_fake(s, seed_shift=0.004) for s in (0, 1, 2)]
    summary = seeds.summarize(results, "t", top_k=5)
    first = summary.numbers[0]
    assert (first.reference, first.key, first.paper) == ("fake.curve", 0, 0.10)
    values = [0.10, 0.104, 0.108]
    assert first.values == pytest.approx(tuple(values))
    assert first.mean == pytest.approx(np.mean(values))
    assert (first.low, first.high) == pytest.approx(stats.t.interval(0.95, 2, loc=np.mean(values), scale=stats.sem(values)))
    # the t interval 0.104 ± 0.0099 lies inside the curve's band 0.10 ± 0.02
    assert first.verdict == "reproduced"
    table = [n for n in summary.numbers if n.reference == "fake.table"]  # tolerance 0.01: the interval straddles
    assert {n.verdict for n in table} == {"inconclusive"} and summary.verdict == "inconclusive"
    (head,) = summary.heads
    assert head.ranks == (1, 4, 7) and head.of == 12 and head.in_top_k == 2 and head.top_k == 5
    far = seeds.summarize([_fake(s, shift=0.5) for s in (0, 1)], "t")
    assert {n.verdict for n in far.numbers} == {"differs"}


def test_another_model_keeps_shape_only_and_unmeasured_numbers_say_so():
    results = [fake_study.run(studies.StudyOptions(model="other-bert", seed=s), None, None) for s in (0, 1)]
    summary = seeds.summarize(results)
    assert {n.verdict for n in summary.numbers} == {"different model: shape only"}
    assert summary.verdict == "different model: shape only"


def test_run_seeds_entries_equal_single_runs_and_progress_names_the_seed():
    seen = []
    options = studies.StudyOptions(limit=2, extra={"seed_shift": 0.01})
    result = seeds.run_seeds(fake_study.STUDY, options, (3, 5), lambda d, t, m=None: seen.append((d, t, m)), None)
    singles = [fake_study.run(studies.StudyOptions(limit=2, seed=s, extra={"seed_shift": 0.01})).to_json() for s in (3, 5)]
    assert [r.to_json() for r in result.per_seed] == singles
    assert seen == [(1, 4, "seed 3 (1 of 2)"), (2, 4, "seed 3 (1 of 2)"), (3, 4, "seed 5 (2 of 2)"), (4, 4, "seed 5 (2 of 2)")]
    again = seeds.SeedsResult.from_json(json.loads(json.dumps(result.to_json())))
    assert again.to_json() == result.to_json()


def test_cli_seeds_json_is_the_contract(monkeypatch, capsys):
    fake_study.install(monkeypatch)
    argv = ["reproduce", "fake", "--limit", "2", "--set", "seed_shift=0.01", "--json", "--quiet"]
    assert main([*argv, "--seeds", "0,1,2"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert set(found) == {"study", "seeds", "per_seed", "summary"}
    assert found["study"] == "fake" and found["seeds"] == [0, 1, 2]
    for seed, entry in zip((0, 1, 2), found["per_seed"]):
        assert main([*argv, "--seed", str(seed)]) == 0
        assert entry == json.loads(capsys.readouterr().out)
    summary = found["summary"]
    assert summary["interval"] == "t" and summary["confidence"] == 0.95
    assert summary["heads"] == [{"claim": "fake head", "head": "1-2", "ranks": [1, 4, 7], "of": 12, "top_k": 5, "in_top_k": 2}]


def test_cli_seeds_and_seed_together_is_a_clear_error(monkeypatch, capsys):
    fake_study.install(monkeypatch)
    assert main(["reproduce", "fake", "--seeds", "0,1", "--seed", "2", "--json"]) != 0
    assert "either --seed S (one run) or --seeds" in capsys.readouterr().err
    assert main(["reproduce", "fake", "--seeds=-1,2", "--json"]) != 0
    assert "-1 is negative" in capsys.readouterr().err


def test_a_study_that_bootstraps_says_so():
    assert studies.get("slides-bias").interval == "bootstrap"
    assert {studies.get(n).interval for n in studies.NAMES} == {"t", "bootstrap"}


def test_notebook_reproduce_with_seeds_draws_the_seeds_mean_and_interval(monkeypatch):
    from core import lens
    from core.charts import reproduce as reproduce_charts

    fake_study.install(monkeypatch)
    seen = []
    chart, frame = lens.reproduce("fake", seeds=[0, 1, 2], limit=1, seed_shift=0.004, return_data=True,
                                  progress=lambda done, total: seen.append((done, total)))
    direct = seeds.run_seeds(fake_study.STUDY, studies.StudyOptions(limit=1, extra={"seed_shift": 0.004}), (0, 1, 2))
    assert frame.equals(reproduce_charts.seeds_frame(direct)) and seen[-1] == (3, 3)
    drawn = chart.to_dict()["datasets"]
    (rows,) = drawn.values()
    means = {r["layer"]: (r["value"], r["low"], r["high"]) for r in rows if r["source"].startswith("mean of 3 seeds")}
    curve = frame[frame["reference"] == "fake.curve"]
    assert means == {int(r.layer): (r.mean, r.low, r.high) for r in curve.itertuples()}
    single_chart, single = lens.reproduce("fake", seed=2, limit=1, seed_shift=0.004, return_data=True)
    assert list(single["measured"][single["reference"] == "fake.curve"]) == pytest.approx(
        [v + 0.008 for v in fake_study.PAPER_CURVE.values()])
    with pytest.raises(ValueError, match="given twice"):
        lens.reproduce("fake", seeds=[1, 1])


def test_clark_ranks_the_paper_head_of_each_relation_as_scipy_does():
    from core import references
    from core.studies.clark import _paper_head_rank

    accuracy = np.random.default_rng(3).random((12, 12)).round(2)  # rounded: ties, which share the better rank
    found = _paper_head_rank(accuracy, "dobj")
    layer, head = (int(n) - 1 for n in references.CLARK_BEST_HEADS["dobj"].split("-"))
    expected = stats.rankdata(-accuracy.ravel(), method="min").reshape(12, 12)[layer, head]
    assert (found.head, found.rank, found.of, found.claim) == ("8-10", expected, 144, "best head for dobj")
    assert _paper_head_rank(accuracy[:6], "dobj") is None  # a 6-layer model has no layer 8


def test_cli_seeds_text_names_each_number_and_head(monkeypatch, capsys):
    fake_study.install(monkeypatch)
    assert main(["reproduce", "fake", "--limit", "1", "--set", "seed_shift=0.004", "--seeds", "0,1,2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "seeds 0, 1, 2: INCONCLUSIVE (95% t interval over the seeds)" in out
    low, high = stats.t.interval(0.95, 2, loc=0.104, scale=stats.sem([0.1, 0.104, 0.108]))
    assert f"0.100, 0.104, 0.108\t0.104 [{low:.3f}, {high:.3f}]\treproduced" in out
    assert "head 1-2 (fake head): rank per seed 1, 4, 7 of 12; in the top 5 in 2 of 3 seeds" in out


def test_cancel_stops_between_and_within_seeds():
    from core.progress import Cancelled

    done = []
    options = studies.StudyOptions(limit=3)
    with pytest.raises(Cancelled):  # asked to stop once the first seed reported its last step
        seeds.run_seeds(fake_study.STUDY, options, (0, 1, 2), lambda d, t, m=None: done.append(m),
                        lambda: len(done) >= 3)
    assert done == ["seed 0 (1 of 3)"] * 3  # the second seed never started


def test_numbers_are_matched_by_reference_not_position():
    from dataclasses import replace

    results = [_fake(s, seed_shift=0.004) for s in (0, 1, 2)]
    results[1] = replace(results[1], comparisons=results[1].comparisons[::-1])  # another order: same numbers
    results[2] = replace(results[2], comparisons=results[2].comparisons[:1])  # the table not measured in seed 2
    summary = seeds.summarize(results)
    curve = next(n for n in summary.numbers if n.reference == "fake.curve" and n.key == 2)
    assert curve.values == pytest.approx((0.35, 0.354, 0.358))
    table = next(n for n in summary.numbers if n.reference == "fake.table" and n.key == "full")
    assert table.values[:2] == pytest.approx((0.90, 0.904)) and table.values[2] is None
    assert table.mean == pytest.approx(0.902)


def test_lens_reproduce_returns_what_the_cli_json_has(monkeypatch, capsys):
    """The notebook twin takes the CLI's settings (seed; seeds and top_k) and gives the same data as --json."""
    from core import lens

    fake_study.install(monkeypatch)
    argv = ["reproduce", "fake", "--limit", "2", "--set", "seed_shift=0.01", "--json", "--quiet"]
    assert main([*argv, "--seeds", "0,1,2", "--top-k", "3"]) == 0
    cli = json.loads(capsys.readouterr().out)
    data = lens.reproduce("fake", limit=2, seed_shift=0.01, seeds=[0, 1, 2], top_k=3, return_data=True)
    assert json.loads(json.dumps(data.to_json())) == cli and cli["summary"]["heads"][0]["top_k"] == 3
    assert main([*argv, "--seed", "4"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert json.loads(json.dumps(lens.reproduce("fake", limit=2, seed_shift=0.01, seed=4,
                                                return_data=True).to_json())) == cli
    with pytest.raises(ValueError, match="either --seed S"):
        lens.reproduce("fake", seed=1, seeds=[0, 1])
