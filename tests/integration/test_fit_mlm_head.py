"""fit-mlm-head (issue 39, item 1): a masked-word head fitted on a frozen encoder, saved as a model folder that
transformers loads as it is, listed with the model it belongs to, and measured honestly."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core.__main__ import main
from core.model import artefacts
from core.model.loading import available_models, load_model
from core.progress import Cancelled
from core.training import mlm_head
from tests.conftest import make_tiny_bert
from tests.tiny_mlm import make_tiny_mlm

WORDS = "the a cat dog man woman girl boy sat ran on in at to of mat river bank park house tree".split()


@pytest.fixture()
def tiny_corpus(tmp_path):
    rng = np.random.default_rng(3)
    lines = {" ".join(rng.choice(WORDS, size=int(rng.integers(4, 9)))) + " ." for _ in range(400)}
    path = tmp_path / "tiny.txt"
    path.write_text("\n".join(sorted(lines)))
    return str(path)


@pytest.fixture()
def tiny_encoder(tmp_path):
    return str(make_tiny_bert(tmp_path / "encoder"))


def test_masking_is_whole_words_at_fifteen_percent_and_eighty_ten_ten():
    rng = np.random.default_rng(0)
    word_ids = [None] + [w for w in range(20) for _ in range(2)] + [None]  # 20 words of two pieces
    ids = [2] + list(range(100, 140)) + [3]
    chosen = kinds = 0
    counts = {"mask": 0, "random": 0, "kept": 0}
    for _ in range(2000):
        masked, labels = mlm_head.mask_whole_words(ids, word_ids, mask_id=4, vocab_size=1000, special_ids={0, 1, 2, 3, 4},
                                                   rng=rng)
        picked = [p for p, label in enumerate(labels) if label != -100]
        assert labels[0] == labels[-1] == -100 and len(picked) == 2 * 3  # round(0.15 * 20) words, both pieces
        for first in picked[::2]:
            pair = masked[first], masked[first + 1]
            assert labels[first] == ids[first] and labels[first + 1] == ids[first + 1]
            if pair == (4, 4):
                counts["mask"] += 1
            elif pair == (ids[first], ids[first + 1]):
                counts["kept"] += 1
            else:
                assert 4 not in pair and all(p not in {0, 1, 2, 3} for p in pair)
                counts["random"] += 1
        chosen += 3
    shares = {k: v / chosen for k, v in counts.items()}
    assert abs(shares["mask"] - 0.8) < 0.02 and abs(shares["random"] - 0.1) < 0.015 and abs(shares["kept"] - 0.1) < 0.015


def test_whole_word_accuracy_and_the_best_constant_count_words_not_pieces():
    labels = np.array([5, 6, 5, 7, 8, 5, 6])
    groups = [[0, 1], [2], [3, 4], [5, 6]]  # words (5,6), (5), (7,8), (5,6)
    predicted = np.array([5, 6, 5, 7, 0, 5, 9])
    assert mlm_head.whole_word_accuracy(predicted, labels, groups) == 2 / 4
    assert mlm_head.best_constant(labels, groups) == (2 / 4, (5, 6))


def test_fitted_folder_loads_in_transformers_guesses_and_keeps_the_encoder(tiny_encoder, tiny_corpus):
    from transformers import AutoModelForMaskedLM, AutoTokenizer, pipeline

    fit = mlm_head.fit_mlm_head(tiny_encoder, tiny_corpus, "tiny-mlm", steps=150)
    folder = artefacts.heads_dir() / "tiny-mlm"
    assert fit.path == str(folder) and fit.held_out >= 20 and fit.vectors > 0
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["BertForMaskedLM"] and config["bertlens_fitted_on"] == tiny_encoder
    assert not list(folder.glob("*.bin")) and list(folder.glob("*.safetensors"))

    mlm = AutoModelForMaskedLM.from_pretrained(folder, use_safetensors=True).eval()
    encoder = load_model(tiny_encoder).model
    for name, tensor in encoder.state_dict().items():
        if not name.startswith("pooler."):
            torch.testing.assert_close(mlm.base_model.state_dict()[name], tensor)  # the encoder was frozen
    assert mlm.get_output_embeddings().weight.data_ptr() == mlm.base_model.embeddings.word_embeddings.weight.data_ptr()

    guesses = pipeline("fill-mask", model=mlm, tokenizer=AutoTokenizer.from_pretrained(folder), top_k=3)(
        "the cat sat on the [MASK] .")
    assert len(guesses) == 3 and all(g["token_str"] for g in guesses)

    # The app finds it by name, with its head, and says what it was fitted on.
    entry = next(e for e in available_models() if e.name == "tiny-mlm")
    assert entry.source == "fitted-head" and entry.fitted_on == tiny_encoder
    assert load_model("tiny-mlm", masked_lm=True).masked_lm is not None


def test_a_model_with_a_head_a_bad_name_and_too_few_sentences_are_refused(tmp_path, tiny_encoder, tiny_corpus):
    with_head = str(make_tiny_mlm(tmp_path / "with-head"))
    with pytest.raises(mlm_head.HeadFitError, match="already has a masked-word head"):
        mlm_head.fit_mlm_head(with_head, tiny_corpus, "x", steps=5)
    with pytest.raises(mlm_head.HeadFitError, match="no '/'"):
        mlm_head.fit_mlm_head(tiny_encoder, tiny_corpus, "../escape", steps=5)
    with pytest.raises(mlm_head.HeadFitError, match="no '/'"):
        mlm_head.fit_mlm_head(tiny_encoder, tiny_corpus, "head\n", steps=5)  # `$` alone would let this through
    with pytest.raises(mlm_head.HeadFitError, match="too few"):
        mlm_head.fit_mlm_head(tiny_encoder, tiny_corpus, "x", limit=10, steps=5)
    with pytest.raises(ValueError, match="--steps must be at least 1"):
        mlm_head.fit_mlm_head(tiny_encoder, tiny_corpus, "x", steps=0)


def test_a_cancelled_fit_leaves_no_folder(tiny_encoder, tiny_corpus):
    calls = []

    def stop_late() -> bool:
        calls.append(1)
        return len(calls) > 8  # after encoding, during training

    with pytest.raises(Cancelled):
        mlm_head.fit_mlm_head(tiny_encoder, tiny_corpus, "cancelled", steps=400, should_stop=stop_late)
    heads = artefacts.heads_dir()
    assert not heads.exists() or list(heads.iterdir()) == []


def test_cli_json_names_the_saved_folder(tiny_encoder, tiny_corpus, capsys):
    assert main(["fit-mlm-head", "--model", tiny_encoder, "--corpus", tiny_corpus, "--steps", "20", "--out",
                 "cli-head", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["name"] == "cli-head" and out["path"] == str(artefacts.heads_dir() / "cli-head")
    assert {"top1_accuracy", "constant_accuracy", "constant_word", "model", "ratio_to_constant"} <= set(out)


def test_minilm_head_beats_the_best_constant_guess_on_held_out_snli(minilm_dir, data_dir):
    """A short fit on real text already guesses better than any constant (the bench's full fit: bench/RESULTS.md)."""
    fit = mlm_head.fit_mlm_head(str(minilm_dir), "snli:train:800", "minilm-quick", steps=80)
    assert fit.held_out_words >= 50
    assert fit.top1_accuracy > fit.constant_accuracy, fit


def test_the_estimate_adds_the_two_measured_phases():
    """Issue 48: the fit's time said before it starts: its sentences at the encoding rate, its steps at the step rate."""
    estimate = mlm_head.FitEstimate(sentences=1000, steps=300, sentences_per_second=50.0, steps_per_second=10.0)
    assert (estimate.encode_seconds, estimate.train_seconds, estimate.seconds) == (20.0, 30.0, 50.0)
    assert estimate.text().startswith("Estimated time: about 50 s on this computer (1,000 sentences")
    assert [mlm_head.about(s) for s in (40, 600, 4800)] == ["about 40 s", "about 10 min", "about 1 h 20 min"]


def test_the_progress_is_one_line_with_the_phase_count_and_the_whole_in_percent(tiny_encoder, tiny_corpus):
    """Issue 48: the line read "step 1/1000 … 9851 / 10850 steps", sentences and steps added into one counter."""
    import re

    seen = []
    fit = mlm_head.fit_mlm_head(tiny_encoder, tiny_corpus, "progress-head", steps=120,
                                progress=lambda done, total, message: seen.append((done, total, message)))
    assert {total for _, total, _ in seen} == {100}  # the whole, in percent
    shares = [done for done, _, _ in seen]
    assert shares == sorted(shares) and shares[-1] == 100
    sentences = fit.sentences + fit.held_out
    encoding = [m for _, _, m in seen if m.startswith("encoding")]
    training = [m for _, _, m in seen if m.startswith("training")]
    assert encoding and training and len(encoding) + len(training) == len(seen)
    assert [m.startswith("encoding") for _, _, m in seen] == [True] * len(encoding) + [False] * len(training)
    for line in encoding:
        done, of = map(lambda n: int(n.replace(",", "")), re.match(r"encoding sentence ([\d,]+) of ([\d,]+)", line).groups())
        assert of == sentences and 0 < done <= sentences
    for line in training:
        step, of = map(int, re.match(r"training the head: step (\d+) of (\d+), loss", line).groups())
        assert of == 120 and 0 < step <= 120
    assert all("left" in m for d, _, m in seen if d < 100)


def test_cli_says_the_estimate_before_it_starts(tiny_encoder, tiny_corpus, capsys):
    assert main(["fit-mlm-head", "--model", tiny_encoder, "--corpus", tiny_corpus, "--steps", "10", "--out",
                 "estimated-head", "--json"]) == 0
    # transformers' own "Loading weights" bar may come first (another test can have turned its bars on): not ours
    ours = [line for line in capsys.readouterr().err.splitlines() if line and "it/s]" not in line]
    first = ours[0]
    assert first.startswith("Estimated time: about") and "10 training steps" in first
