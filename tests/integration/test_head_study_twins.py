"""The head studies declared once (core.analyses.head_studies): each lens twin's `return_data=True` `.to_json()` is
what its CLI subcommand's --json prints (same keys, same numbers), for one model and for two; the old
lens.cls_by_feature still draws Fig. 7 by feature."""

from __future__ import annotations

import numpy as np
import pytest

from core import lens
from tests.cli_json import as_printed, cli_json


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("studies") / "s.txt"
    path.write_text("the cat sat on the mat .\na dog ran in the park !\nthe man ran to the house .\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def labels(tmp_path_factory):
    from core.analyses import pattern_labels as pl

    rng = np.random.default_rng(0)
    made = [pl.MapLabel("m", str(i), None, 0, 0, p, tuple(pl.downsample(rng.random((7, 7)) + np.eye(7) * k)))
            for i, (p, k) in enumerate([("vertical", 0), ("diagonal", 5), ("diagonal", 6)])]
    path = tmp_path_factory.mktemp("labels") / "labels.json"
    pl.write_labels(path, made)
    return str(path)


def test_each_head_study_twin_gives_the_cli_json(tiny_bert_dir, corpus, labels, capsys):
    model = str(tiny_bert_dir)
    cases = [
        (["head-features", "--corpus", "ud:dev:6", "--seed", "2"],
         lambda **kw: lens.head_features(model, "ud:dev:6", seed=2, **kw)),
        (["cls-attention", "--corpus", corpus, "--batch-size", "2"],
         lambda **kw: lens.cls_attention(model, corpus, batch_size=2, **kw)),
        (["cls-attention", "--by", "feature", "--corpus", "ud:dev:5"],
         lambda **kw: lens.cls_attention(model, "ud:dev:5", by="feature", **kw)),
        (["aspect-heads", "--split", "test", "--limit", "12"], lambda **kw: lens.aspect_heads(model, limit=12, **kw)),
        (["head-map", "--corpus", corpus, "--seed", "3"], lambda **kw: lens.head_map(model, corpus, seed=3, **kw)),
        (["pattern-shares", "--corpus", corpus, "--labels", labels],
         lambda **kw: lens.pattern_shares(model, corpus, labels=labels, **kw)),
    ]
    for argv, twin in cases:
        expected = cli_json(capsys, *argv, "--model", model)
        assert not isinstance(twin(), tuple), argv[0]  # a chart, unless return_data
        data = twin(return_data=True)
        assert as_printed(data.to_json()) == expected, argv[0]
        chart, frame = data
        assert chart.to_dict() and len(frame), argv[0]


def test_two_models_give_the_cli_models_list(tiny_bert_dir, tmp_path, corpus, capsys):
    from tests.conftest import make_tiny_bert

    other = str(make_tiny_bert(tmp_path / "other", seed=3))
    expected = cli_json(capsys, "head-map", "--model", str(tiny_bert_dir), "--model", other, "--corpus", corpus)
    data = lens.head_map([str(tiny_bert_dir), other], corpus, return_data=True)
    assert [m["model"] for m in expected["models"]] == [str(tiny_bert_dir), other]
    assert as_printed(data.to_json()) == expected


def test_cls_by_feature_is_cls_attention_by_feature(tiny_bert_dir):
    old = lens.cls_by_feature(str(tiny_bert_dir), "ud:dev:4", return_data=True)
    new = lens.cls_attention(str(tiny_bert_dir), "ud:dev:4", by="feature", return_data=True)
    assert old.to_json() == new.to_json() and old.to_json()["by"] == "feature"
    with pytest.raises(ValueError, match="by must be one of type, feature"):
        lens.cls_attention(str(tiny_bert_dir), by="word")
