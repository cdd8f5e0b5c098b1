"""`erase` (issue 49): LEACE on one layer's word vectors, checked by a fresh probe, saved, applied by the formula,
and its effect on a tiny masked-word model recomputed with plain torch hooks."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.cli_json import cli_json
from tests.tiny_mlm import make_tiny_mlm

# (word, upos) pools from the tiny vocabulary: sentences "DET NOUN VERB ADP DET NOUN ." in random order of words.
DETS, NOUNS = ("the", "a"), ("cat", "dog", "mat", "river", "bank", "man", "woman", "girl", "boy", "park", "house", "tree")
VERBS, ADPS, PRONS = ("sat", "ran", "was", "is"), ("on", "in", "at", "to"), ("he", "she", "it", "they")
KEYS = {"name", "path", "layer", "task", "majority", "probe_before", "probe_after", "rank", "effect"}


def conllu(n: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    out = []
    for s in range(n):
        if rng.random() < 0.5:
            words = [(rng.choice(DETS), "DET"), (rng.choice(NOUNS), "NOUN")]
        else:
            words = [(rng.choice(PRONS), "PRON")]
        words += [(rng.choice(VERBS), "VERB"), (rng.choice(ADPS), "ADP"), (rng.choice(DETS), "DET"),
                  (rng.choice(NOUNS), "NOUN"), (".", "PUNCT")]
        out.append(f"# sent_id = {s}")
        for i, (word, upos) in enumerate(words, start=1):
            out.append(f"{i}\t{word}\t{word}\t{upos}\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_")
        out.append("")
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def treebanks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("treebanks")
    (folder / "train.conllu").write_text(conllu(240, 0))
    (folder / "eval.conllu").write_text(conllu(120, 1))
    return str(folder / "train.conllu"), str(folder / "eval.conllu")


@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory):
    return str(make_tiny_mlm(tmp_path_factory.mktemp("tiny-mlm"), hidden=32))


def run(model, treebanks, **kw):
    from core.analyses.layer_knowledge.erasure import ANALYSIS, erase_inputs
    from core.model.loading import load_model

    out = kw.pop("out", None)
    return ANALYSIS.run_function()(load_model(model), erase_inputs("upos", *treebanks, out), ANALYSIS.make(kw))


def test_probe_after_erasure_is_at_the_majority_and_the_file_reproduces_the_vectors(tiny_mlm, treebanks):
    from core.analyses.layer_knowledge.erasure import list_erasers, load_eraser, majority_accuracy, probe_accuracy
    from core.analyses.layer_knowledge.tasks import labelled_words
    from core.data import corpus as corpora
    from core.model.loading import load_model

    result = run(tiny_mlm, treebanks, layer=1, out="tiny-upos")
    assert result.layer == 2 and result.task == "upos" and result.rank >= 1
    assert result.probe_before > result.majority + 0.2  # there was something to erase
    assert abs(result.probe_after - result.majority) <= 0.05
    assert list_erasers() == ["tiny-upos"]
    saved = load_eraser("tiny-upos")
    assert saved.config == {**saved.config, "model": tiny_mlm, "layer": 2, "task": "upos",
                            "labels": ["ADP", "DET", "NOUN", "PRON", "PUNCT", "VERB"]}
    # The saved file applied by the formula, in float64 numpy, equals the package's eraser the command used.
    lm = load_model(tiny_mlm)
    words = labelled_words(lm, corpora.require_trees(corpora.resolve(treebanks[1])), "upos", [2])
    x = words.at(2).astype(np.float64)
    left, right, bias = (getattr(saved.eraser, k).astype(np.float64) for k in ("proj_left", "proj_right", "bias"))
    by_hand = x - ((x - bias) @ right.T) @ left.T
    np.testing.assert_allclose(result.eraser.erase(words.at(2)), by_hand, atol=1e-5)
    # And an independent probe on the erased held-out vectors, trained on erased training vectors, is at the majority.
    train = labelled_words(lm, corpora.require_trees(corpora.resolve(treebanks[0])), "upos", [2])
    after = probe_accuracy(saved.eraser.erase(train.at(2)), train.labels, by_hand, words.labels)
    assert abs(after - majority_accuracy(train.labels, words.labels)) <= 0.05


def test_the_hooks_change_the_hidden_states_by_the_formula(tiny_mlm, treebanks):
    import torch

    from core.analyses.layer_knowledge.erasure import erasing, fit_leace, random_eraser
    from core.model.loading import load_model

    lm = load_model(tiny_mlm)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, lm.hidden_size)).astype(np.float32)
    labels = [str(v) for v in rng.integers(0, 3, 300)]
    eraser = fit_leace(x, labels, ("0", "1", "2"))
    feed = lm.tokenizer(["the cat sat on the mat .", "he ran"], padding=True, return_tensors="pt")
    seen = {}
    # What layer 2 receives, read by a plain torch hook (transformers' hidden_states tuple records each layer's
    # output before any hook on it has changed it).
    handle = lm.model.encoder.layer[1].register_forward_pre_hook(
        lambda _m, args, kwargs: seen.__setitem__("input", (args[0] if args else kwargs["hidden_states"]).clone()),
        with_kwargs=True)
    try:
        with torch.no_grad():
            plain = lm.model(**feed, output_hidden_states=True).hidden_states
            with erasing(lm.model, 0, eraser):
                last = lm.model(**feed).last_hidden_state
    finally:
        handle.remove()
    np.testing.assert_allclose(seen["input"].numpy(), eraser.erase(plain[1].numpy()), atol=1e-5)
    assert not np.allclose(last.numpy(), plain[2].numpy())  # the rest of the model runs on the erased states
    control = random_eraser(eraser, 3)
    assert control.rank == eraser.rank == 2  # LEACE removes k - 1 = 2 directions for 3 classes
    q = control.proj_left
    np.testing.assert_allclose(q.T @ q, np.eye(q.shape[1]), atol=1e-5)  # an orthonormal basis: a projection


def test_masked_word_effect_equals_plain_torch_hooks(tiny_mlm, treebanks):
    import torch
    from transformers import BertForMaskedLM, BertTokenizerFast

    from core.analyses.layer_knowledge.erasure import load_eraser, random_eraser
    from core.data import corpus as corpora
    from core.training.mlm_head import mask_whole_words

    result = run(tiny_mlm, treebanks, layer=0, out="tiny-effect", effect_limit=60, seed=5)
    assert result.effect["kind"] == "masked_word" and result.effect["n"] > 20
    eraser = load_eraser("tiny-effect").eraser
    sentences = [" ".join(s.words) for s in corpora.require_trees(corpora.resolve(treebanks[1]))][:60]
    model = BertForMaskedLM.from_pretrained(tiny_mlm).eval()
    tok = BertTokenizerFast.from_pretrained(tiny_mlm)

    def top1(chosen) -> tuple[float, int]:
        rng = np.random.default_rng(5)  # the command masks with one generator, sentence after sentence
        right = total = 0
        handle = None
        if chosen is not None:
            left, r, bias = (torch.from_numpy(getattr(chosen, k)) for k in ("proj_left", "proj_right", "bias"))
            handle = model.bert.encoder.layer[0].register_forward_hook(
                lambda _m, _i, out: (out[0] - ((out[0] - bias) @ r.T) @ left.T,) + tuple(out[1:])
                if isinstance(out, tuple) else out - ((out - bias) @ r.T) @ left.T)
        try:
            for sentence in sentences:
                enc = tok(sentence)
                ids, labels = mask_whole_words(enc["input_ids"], enc.word_ids(), mask_id=tok.mask_token_id,
                                               vocab_size=len(tok), special_ids=set(tok.all_special_ids), rng=rng,
                                               all_mask=True)
                with torch.no_grad():
                    guess = model(input_ids=torch.tensor([ids])).logits[0].argmax(-1).numpy()
                words = {}
                for p, label in enumerate(labels):
                    if label != -100:
                        words.setdefault(enc.word_ids()[p], []).append(guess[p] == label)
                right += sum(all(v) for v in words.values())
                total += len(words)
        finally:
            if handle is not None:
                handle.remove()
        return right / total, total

    before, n = top1(None)
    after, _ = top1(eraser)
    control, _ = top1(random_eraser(eraser, 5))
    assert result.effect["n"] == n
    assert result.effect["before"] == pytest.approx(before, abs=1e-9)
    assert result.effect["after"] == pytest.approx(after, abs=1e-9)
    assert result.effect["random_control"] == pytest.approx(control, abs=1e-9)


def test_cli_json_keys_and_the_lens_twin_agree(tiny_mlm, treebanks, capsys):
    from core import lens

    printed = cli_json(capsys, "erase", "--model", tiny_mlm, "--task", "upos", "--corpus", treebanks[0],
                       "--eval-corpus", treebanks[1], "--layer", "2", "--out", "cli-one", "--effect-sentences", "20")
    assert set(printed) == KEYS
    assert printed["name"] == "cli-one" and printed["layer"] == 2 and printed["path"].endswith("erasers/cli-one")
    assert set(printed["effect"]) == {"kind", "before", "after", "random_control", "n"}
    data = lens.erase(tiny_mlm, "upos", treebanks[0], treebanks[1], layer=1, out="lens-one", effect_limit=20,
                      return_data=True)
    twin = data.to_json()
    assert {k: v for k, v in twin.items() if k not in ("name", "path")} == \
        {k: v for k, v in printed.items() if k not in ("name", "path")}
    assert twin["name"] == "lens-one"


def test_bad_input_is_one_line_and_a_taken_name_is_refused_before_the_work(tiny_mlm, treebanks, capsys):
    from core.__main__ import main

    base = ["erase", "--model", tiny_mlm, "--corpus", treebanks[0], "--eval-corpus", treebanks[1], "--json"]
    assert main(base + ["--task", "pos"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "upos, xpos, deprel or morph:FEAT" in err and "\n" not in err
    assert main(base + ["--task", "upos", "--layer", "3"]) == 2  # the tiny model has layers 1..2
    assert "layers are 1..2" in capsys.readouterr().err
    assert main(base + ["--task", "upos", "--out", "bad/name"]) == 2
    assert "--out" in capsys.readouterr().err
    from core.analyses.layer_knowledge.erasure import erasers_dir

    (erasers_dir() / "taken").mkdir(parents=True)
    started = time.perf_counter()
    assert main(base + ["--task", "upos", "--out", "taken"]) == 2
    assert "saved already" in capsys.readouterr().err
    assert time.perf_counter() - started < 2  # refused before the model or the treebanks load


def test_classification_effect_equals_plain_torch_hooks(tiny_bert_dir, tmp_path, treebanks):
    import torch

    from core.analyses.layer_knowledge.erasure import load_eraser, random_eraser
    from core.training import load_classifier
    from core.training.runs import run_eval_sample
    from tests.gender_run import make_gender_run

    name, _ = make_gender_run(tiny_bert_dir, tmp_path)
    effect = run(name, treebanks, layer=0, out="run-effect", effect_limit=50, seed=2).effect
    assert effect["kind"] == "classification"
    clf = load_classifier(name)
    sample = run_eval_sample(clf, 50, 2)
    assert effect["n"] == len(sample.examples) > 0

    def accuracy(chosen) -> float:
        handle = None
        if chosen is not None:
            left, right, bias = (torch.from_numpy(getattr(chosen, k)) for k in ("proj_left", "proj_right", "bias"))
            handle = clf.model.encoder.encoder.layer[0].register_forward_hook(
                lambda _m, _i, o: (o[0] - ((o[0] - bias) @ right.T) @ left.T,) + tuple(o[1:])
                if isinstance(o, tuple) else o - ((o - bias) @ right.T) @ left.T)
        try:  # one example at a time: no padding, no batching
            right_guesses = sum(clf.labels[int(clf.predict_proba([(e.text, e.text_b)])[0].argmax())] == e.label
                                for e in sample.examples)
        finally:
            if handle is not None:
                handle.remove()
        return right_guesses / len(sample.examples)

    eraser = load_eraser("run-effect").eraser
    assert effect["before"] == pytest.approx(accuracy(None), abs=1e-9)
    assert effect["after"] == pytest.approx(accuracy(eraser), abs=1e-9)
    assert effect["random_control"] == pytest.approx(accuracy(random_eraser(eraser, 2)), abs=1e-9)
