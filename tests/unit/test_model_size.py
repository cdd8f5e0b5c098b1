"""A model whose config.json implies more parameters than the set size is refused before any tensor is allocated,
with the number (issue 44, item 3): a config naming 100,000 layers was built layer by layer for minutes (3.2 GB and
growing) before."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core import settings
from core.model import loading

REPO = Path(__file__).resolve().parents[2]
# The width of BERT-base: 100,000 such layers are 707.8 B parameters (the tiny model's own width would be 0.8 B).
BERT_BASE_WIDTH = {"hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12}


def _huge_copy(tiny_bert_dir: Path, folder: Path, **changes) -> Path:
    """The tiny BERT's folder (tokenizer and safetensors included) with its config changed."""
    shutil.copytree(tiny_bert_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return folder


def test_implied_parameters_match_a_built_bert_base():
    """The count from the config alone, checked against the parameters of a BERT-base that transformers builds
    (an independent count): within 1 %."""
    torch = pytest.importorskip("torch")
    from transformers import BertConfig, BertModel

    config = BertConfig()  # bert-base-uncased's sizes
    with torch.device("meta"):  # parameters counted without allocating them
        real = sum(p.numel() for p in BertModel(config, add_pooling_layer=False).parameters())
    counted, how = loading.implied_parameters(config.to_dict())
    assert abs(counted - real) / real < 0.01
    assert "12 layers" in how


def test_a_config_of_100000_layers_is_refused_fast_with_the_number(tiny_bert_dir, tmp_path):
    folder = _huge_copy(tiny_bert_dir, tmp_path / "huge", **BERT_BASE_WIDTH, num_hidden_layers=100_000)
    started = time.perf_counter()
    with pytest.raises(loading.ModelUnavailable) as err:
        loading.load_model(str(folder))
    assert time.perf_counter() - started < 2.0
    message = str(err.value)
    # 100,000 x (4 x 768^2 + 2 x 768 x 3072) = 707.8 B, plus the tiny vocabulary's embeddings
    assert "too large" in message and "707.8 B parameters" in message and "100000 layers" in message
    assert "up to 4.0 B" in message


def test_the_limit_is_a_setting(tiny_bert_dir, tmp_path, monkeypatch):
    """BERTLENS_MAX_MODEL_PARAMETERS moves the limit: the tiny model itself is refused under a 1 K limit, and a
    4 B limit keeps BERT-base-sized configs loadable."""
    monkeypatch.setenv("BERTLENS_MAX_MODEL_PARAMETERS", "1K")
    assert settings.max_model_parameters() == 1000
    with pytest.raises(loading.ModelUnavailable, match="up to 1.0 K parameters"):
        loading.load_model(str(tiny_bert_dir))
    monkeypatch.delenv("BERTLENS_MAX_MODEL_PARAMETERS")
    loading.check_model_size({"model_type": "bert"}, "bert-base-uncased")  # defaults: BERT-base, allowed


@pytest.mark.parametrize("value", ["12", -1, True, 1.5])
def test_a_size_that_is_no_whole_number_gets_a_message(value):
    with pytest.raises(loading.ModelUnavailable, match="num_hidden_layers must be a whole number"):
        loading.check_model_size({"num_hidden_layers": value}, "odd")


def test_the_command_line_refuses_it_with_exit_2(tiny_bert_dir, tmp_path):
    folder = _huge_copy(tiny_bert_dir, tmp_path / "huge", **BERT_BASE_WIDTH, num_hidden_layers=100_000)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    # Before the check this built the model for minutes: the timeout makes that a failure, not a hang.
    done = subprocess.run([sys.executable, "-m", "core", "anisotropy", "--model", str(folder), "--corpus", "builtin",
                           "--limit", "3"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "implies" in done.stderr and "parameters" in done.stderr and "Traceback" not in done.stderr


def test_a_page_shows_the_refusal_as_an_error(tiny_bert_dir, tmp_path):
    """The attention page opened on the 100,000-layer model: one st.error naming the size, no exception."""
    from tests.app.conftest import _make_app

    folder = _huge_copy(tiny_bert_dir, tmp_path / "huge", **BERT_BASE_WIDTH, num_hidden_layers=100_000)
    at = _make_app(str(folder), "the cat sat on the mat")
    at.switch_page("app_pages/attention.py")
    started = time.perf_counter()
    at.run()
    assert not at.exception, at.exception
    assert time.perf_counter() - started < 60
    assert any("too large" in e.value and "707.8 B parameters" in e.value.replace("\\", "") for e in at.error), \
        [e.value for e in at.error]
