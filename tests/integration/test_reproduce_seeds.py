"""`reproduce STUDY --seeds` on a real study (ethayarajh: a tiny random BERT, 40 built-in sentences): each per-seed
entry equals `reproduce STUDY --seed s --json` run alone, the model is loaded once, and the summary's numbers are
the per-seed values with scipy's t interval."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from core.__main__ import main
from core.model import loading
from tests.conftest import make_tiny_bert


def test_seeds_entries_equal_single_seed_runs_and_the_model_loads_once(tmp_path, monkeypatch, capsys):
    model = str(make_tiny_bert(tmp_path / "tiny"))
    argv = ["reproduce", "ethayarajh", "--model", model, "--corpus", "builtin", "--limit", "40", "--json", "--quiet"]
    loads = []
    real = loading._load_model
    monkeypatch.setattr(loading, "_load_model", lambda *a: loads.append(a) or real(*a))
    assert main([*argv, "--seeds", "0,1,2"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert len(loads) == 1  # shared by the three seeds
    for seed, entry in zip((0, 1, 2), found["per_seed"]):
        assert main([*argv, "--seed", str(seed)]) == 0
        assert entry == json.loads(capsys.readouterr().out)
    assert len(loads) == 4  # each single run loads its own
    random_cosine = {int(k): [e["measured"]["random_cosine"][k] for e in found["per_seed"]]
                     for k in found["per_seed"][0]["measured"]["random_cosine"]}
    assert len({tuple(v) for v in random_cosine.values()}) > 1 and any(len(set(v)) > 1 for v in random_cosine.values())
    numbers = [n for n in found["summary"]["numbers"] if n["measure"] == "random_cosine"]
    unmeasured = [n for n in numbers if n["key"] not in random_cosine]  # the paper's layers 3-12: 2 layers here
    assert unmeasured and all(n["values"] == [None] * 3 and n["verdict"] == "not measured" for n in unmeasured)
    for n in (n for n in numbers if n["key"] in random_cosine):
        values = random_cosine[n["key"]]
        assert n["values"] == values
        assert n["mean"] == pytest.approx(np.mean(values))
        low, high = stats.t.interval(0.95, 2, loc=np.mean(values), scale=stats.sem(values))
        assert (n["low"], n["high"]) == pytest.approx((low, high))
        assert n["verdict"] == "different model: shape only"  # a tiny random BERT is not bert-base-cased
