"""The Bias page's "erase gender" (issue 49): a gender eraser fitted on a tiny run's vectors of the swap list's
words, and the flip rate scored again with it applied (`bias --corpus --model RUN --erase NAME`): an eraser of rank 0
leaves the flip rate as it was; a fitted one gives the flip rate of the run's own forward with the formula applied by
a plain torch hook; the notebook twin prints the same JSON."""

from __future__ import annotations

import json

import pytest
import torch

from core.__main__ import main
from tests.gender_run import make_gender_run


@pytest.fixture
def gender_run(tiny_bert_dir, tmp_path):
    return make_gender_run(tiny_bert_dir, tmp_path)


def bias_json(capsys, *argv) -> dict:
    capsys.readouterr()
    assert main(["bias", *argv, "--json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_rank_zero_eraser_leaves_the_flip_rate_as_it_was(gender_run, capsys):
    from core.analyses.layer_knowledge.erasure import erasers_dir, identity_eraser, save_eraser

    run, _ = gender_run
    save_eraser(identity_eraser(32), erasers_dir() / "nothing", {"model": run, "layer": 1, "task": "none",
                                                                  "labels": []})
    out = bias_json(capsys, "--corpus", "builtin", "--model", run, "--erase", "nothing")
    erased = out["erased"]
    assert out["flips"] > 0 and erased["swappable"] == out["swappable"]
    assert erased["flips_before"] == erased["flips_after"] == out["flips"]
    assert erased["flip_rate_after"] == pytest.approx(out["flip_rate"])


def test_erasing_gender_gives_the_flip_rate_of_a_plain_torch_hook(gender_run, capsys):
    from core import lens
    from core.bias import DEFAULT_SWAPS, swap_text
    from core.bias.erase_gender import fit_gender_eraser
    from core.data.corpus import resolve
    from core.model.loading import load_model
    from core.training import load_classifier

    run, texts = gender_run
    fit = fit_gender_eraser(load_model(run), texts, 1, out="gender-L2")
    assert fit.saved.layer == 2 and fit.saved.eraser.rank == 1  # two lists: one direction
    assert fit.probe_before > fit.majority + 0.2 and abs(fit.probe_after - fit.majority) <= 0.05
    out = bias_json(capsys, "--corpus", "builtin", "--model", run, "--erase", "gender-L2")

    clf = load_classifier(run)
    e = fit.saved.eraser
    left, right, bias = (torch.from_numpy(getattr(e, k)) for k in ("proj_left", "proj_right", "bias"))
    handle = clf.model.encoder.encoder.layer[1].register_forward_hook(
        lambda _m, _i, o: (o[0] - ((o[0] - bias) @ right.T) @ left.T,) + tuple(o[1:]) if isinstance(o, tuple)
        else o - ((o - bias) @ right.T) @ left.T)
    try:
        items = [resolve("builtin", seed=0).items[i] for i in out["swapped"]]
        before = [int(clf.predict_proba([(t, None)])[0].argmax()) for t in items]
        after = [int(clf.predict_proba([(swap_text(t, DEFAULT_SWAPS), None)])[0].argmax()) for t in items]
    finally:
        handle.remove()
    flips = sum(b != a for b, a in zip(before, after))
    assert out["erased"]["flips_after"] == flips
    assert out["erased"]["flips_before"] == out["flips"]
    assert out["erased"]["flip_rate_after"] == pytest.approx(flips / len(items))
    data = lens.bias(run, "builtin", erase="gender-L2", return_data=True)
    assert data.to_json() == out
    assert list(data[1]["flips"]) == [out["flips"], flips]  # the frame the chart draws


def test_erase_without_a_corpus_or_with_an_unknown_name_is_one_line(gender_run, capsys):
    run, _ = gender_run
    assert main(["bias", "--model", run, "--erase", "x"]) == 2
    assert "--erase needs --corpus" in capsys.readouterr().err
    assert main(["bias", "--corpus", "builtin", "--model", run, "--erase", "missing"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no eraser named 'missing'" in err and "\n" not in err
