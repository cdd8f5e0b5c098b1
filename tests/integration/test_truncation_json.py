"""Long input is cut to the model's length *with* a notice (issue 32): every JSON result of a subcommand that
encodes user text carries "truncated": {"tokens_dropped": N}, N checked against the tokenizer's own untruncated
count; and a JSON result too large for a terminal is refused, naming --out, or written there."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from core import validation
from core.__main__ import main
from tests.tiny_mlm import make_tiny_mlm

# 120 words of the tiny vocabulary: far over the tiny models' 64 positions.
LONG = " ".join(["the cat sat on the mat ."] * 20)
SHORT = "the cat sat on the mat ."


@pytest.fixture(scope="module")
def tiny_mlm_dir(tmp_path_factory):
    return make_tiny_mlm(tmp_path_factory.mktemp("tiny-mlm"))


def _expected_dropped(model_dir, text: str) -> int:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    full = len(tokenizer(text, truncation=False)["input_ids"])  # [CLS] ... [SEP], nothing cut
    return max(0, full - tokenizer.model_max_length)


def _json_of(argv, capsys) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


TEXT_COMMANDS = [
    ["pca", "--text", "{text}"],
    ["attention-norms", "--text", "{text}"],
    ["neuron", "--text", "{text}", "--layer", "1", "--head", "0", "--query", "1"],
    ["head-view", "--text", "{text}"],
    ["explain", "--text", "{text}", "--method", "rollout"],
    ["neighbours", "--text", "{text}", "--word", "cat", "--corpus", "builtin", "--k", "2", "--quiet"],
]


@pytest.mark.parametrize("command", TEXT_COMMANDS)
def test_json_results_that_encode_user_text_say_what_was_cut(command, tiny_bert_dir, capsys):
    expected = _expected_dropped(tiny_bert_dir, LONG)
    assert expected > 50  # the text really is long for these models
    for text, dropped in ((LONG, expected), (SHORT, 0)):
        argv = [a.replace("{text}", text) for a in command] + ["--model", str(tiny_bert_dir), "--json"]
        assert _json_of(argv, capsys)["truncated"] == {"tokens_dropped": dropped}


@pytest.mark.parametrize("command", [*TEXT_COMMANDS, ["fill-mask", "--text", "the [MASK] sat on {text}", "--top-k", "2"]])
def test_terminal_output_says_what_was_cut_on_stderr(command, tiny_bert_dir, tiny_mlm_dir, capsys):
    """Issue 32: without --json these commands printed their tables for a cut input without a word. The warning is
    the pages' notice, on stderr (stdout keeps the table), once, with the tokenizer's own count."""
    model = tiny_mlm_dir if command[0] == "fill-mask" else tiny_bert_dir
    for text in (LONG, SHORT):
        argv = [a.replace("{text}", text) for a in command] + ["--model", str(model)]
        dropped = _expected_dropped(model, argv[2])
        assert main(argv) == 0
        captured = capsys.readouterr()
        warned = [line for line in captured.err.splitlines() if "cut off" in line]
        assert warned == ([f"warning: The input is longer than the model reads (64 tokens): {dropped} word pieces "
                           "at its end were cut off and are not part of this view."] if text == LONG else [])
        assert (dropped > 50) == (text == LONG) and captured.out and "cut off" not in captured.out


def test_explorer_project_says_which_examples_were_cut(tiny_bert_dir, tmp_path, capsys):
    """Issue 32: `project` over an uploaded file cut its long rows to the model's length without a word (and the
    page's projector did the same). Now the JSON carries the pieces dropped over all rows, stderr says how many rows."""
    rows = [SHORT, LONG, "the dog ran in the park .", LONG + " the end"]
    corpus = tmp_path / "rows.csv"
    corpus.write_text("text,label\n" + "".join(f"{text},{i % 2}\n" for i, text in enumerate(rows)))
    dropped = [_expected_dropped(tiny_bert_dir, text) for text in rows]
    assert dropped[0] == dropped[2] == 0 and min(dropped[1], dropped[3]) > 50
    argv = ["project", "--model", str(tiny_bert_dir), "--corpus", str(corpus), "--quiet"]
    notice = (f"warning: 2 of 4 examples are longer than the model reads (64 tokens): {sum(dropped)} word pieces at "
              "their ends were cut off and are not part of this view.")
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["truncated"] == {"tokens_dropped": sum(dropped)}
    assert [line for line in captured.err.splitlines() if "cut off" in line] == [notice]
    assert main(argv) == 0
    assert [line for line in capsys.readouterr().err.splitlines() if "cut off" in line] == [notice]
    corpus.write_text("text,label\n" + "".join(f"{text},{i % 2}\n" for i, text in enumerate([SHORT, rows[2], "a girl sat at the house ."])))
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["truncated"] == {"tokens_dropped": 0} and "cut off" not in captured.err


def test_attention_norm_shares_says_which_inputs_were_cut(tiny_bert_dir, tmp_path, capsys):
    """Issue 32: `attention-norm-shares` over a file cut its long lines without a word."""
    lines = [SHORT, LONG, "a dog ran in the park ."]
    corpus = tmp_path / "lines.txt"
    corpus.write_text("\n".join(lines) + "\n")
    dropped = sum(_expected_dropped(tiny_bert_dir, text) for text in lines)
    assert main(["attention-norm-shares", "--model", str(tiny_bert_dir), "--corpus", str(corpus), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["truncated"] == {"tokens_dropped": dropped} and dropped > 50
    assert [line for line in captured.err.splitlines() if "cut off" in line] == [
        f"warning: 1 of 3 examples are longer than the model reads (64 tokens): {dropped} word pieces at their ends "
        "were cut off and are not part of this view."]


def test_fill_mask_json_says_what_was_cut(tiny_mlm_dir, capsys):
    text = "the [MASK] sat on the mat . " + LONG
    expected = _expected_dropped(tiny_mlm_dir, text)
    result = _json_of(["fill-mask", "--model", str(tiny_mlm_dir), "--text", text, "--top-k", "2", "--json"], capsys)
    assert expected > 50 and result["truncated"] == {"tokens_dropped": expected}


def test_large_json_is_refused_naming_out_or_written_there(tiny_bert_dir, tmp_path, monkeypatch, capsys):
    argv = ["attention-norms", "--model", str(tiny_bert_dir), "--text", LONG, "--json"]
    monkeypatch.setattr(validation, "MAX_JSON_BYTES", 10_000)
    assert main(argv) == 2
    captured = capsys.readouterr()
    last = captured.err.splitlines()[-1]  # (transformers' own "Loading weights" bar may come before it)
    assert captured.out == "" and last.startswith("error: the JSON result is larger than") and "--out FILE.json" in last
    out = tmp_path / "norms.json"
    assert main([*argv, "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["truncated"] == {"tokens_dropped": _expected_dropped(tiny_bert_dir, LONG)}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "models_cache") == ["norms.json"]


def test_the_ui_notice_counts_the_same_pieces(tiny_bert_dir):
    from core.model.encoding import tokenize
    from core.model.loading import load_model

    lm = load_model(str(tiny_bert_dir))
    notice = validation.truncation_notice(tokenize(lm, [LONG]))
    assert f"{_expected_dropped(tiny_bert_dir, LONG)} word pieces" in notice and "(64 tokens)" in notice
    assert validation.truncation_notice(tokenize(lm, [SHORT])) is None


def _pair_dropped(model_dir, a: str, b: str) -> int:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return max(0, len(tokenizer(a, b, truncation=False)["input_ids"]) - tokenizer.model_max_length)


# Corpus passes over a file of lines (issue 32): each cut its long lines without a word. "{m}" = the model folder,
# "{c}" = the corpus; the key checked is "truncated" unless the command's "truncated" is its --text's.
CORPUS_COMMANDS = {
    "anisotropy": (["anisotropy", "--model", "{m}", "--corpus", "{c}", "--pairs", "10", "--min-contexts", "2"], "truncated"),
    "heads": (["heads", "--model", "{m}", "--corpus", "{c}", "--quiet"], "truncated"),
    "cls-attention": (["cls-attention", "--model", "{m}", "--corpus", "{c}", "--quiet"], "truncated"),
    "head-map": (["head-map", "--model", "{m}", "--corpus", "{c}", "--quiet"], "truncated"),
    "attention-change": (["attention-change", "--a", "{m}", "--b", "{m}", "--corpus", "{c}", "--quiet"], "truncated"),
    "pca --background": (["pca", "--model", "{m}", "--text", SHORT, "--background", "{c}"], "background_truncated"),
    "neighbours": (["neighbours", "--model", "{m}", "--text", SHORT, "--word", "cat", "--corpus", "{c}", "--quiet"],
                   "corpus_truncated"),
}


@pytest.mark.parametrize("name", CORPUS_COMMANDS)
def test_corpus_passes_say_which_examples_were_cut(name, tiny_bert_dir, tmp_path, capsys):
    lines = [SHORT, LONG, "the dog ran in the park .", "a girl sat on the mat ."]
    corpus = tmp_path / "lines.txt"
    command, key = CORPUS_COMMANDS[name]
    for shown, rows in (("long", lines), ("short", [lines[0], *lines[2:]])):
        corpus.write_text("\n".join(rows) + "\n")
        dropped = sum(_expected_dropped(tiny_bert_dir, text) for text in rows)
        argv = [a.replace("{m}", str(tiny_bert_dir)).replace("{c}", str(corpus)) for a in command]
        assert main([*argv, "--json"]) == 0
        captured = capsys.readouterr()
        result = json.loads(captured.out)
        assert result[key] == {"tokens_dropped": dropped}
        assert (dropped > 50) == (shown == "long")
        warned = [line for line in captured.err.splitlines() if "cut off" in line]
        assert warned == ([f"warning: 1 of 4 examples are longer than the model reads (64 tokens): {dropped} word "
                           "pieces at their ends were cut off and are not part of this view."] if shown == "long" else [])
        if key != "truncated":
            assert result["truncated"] == {"tokens_dropped": 0}  # the --text's own, unchanged


def test_pair_attention_says_which_pairs_were_cut(tiny_bert_dir, monkeypatch, capsys):
    from core.analyses import heads

    pairs = [(SHORT, "the dog ran in the park ."), (LONG, SHORT), (SHORT, "a girl sat on the mat ."), (SHORT, SHORT)]
    gold = ["equivalent", "not equivalent", "not equivalent", "equivalent"]
    monkeypatch.setattr(heads, "mrpc_pairs", lambda spec, seed, limit: (pairs, gold, spec))
    dropped = sum(_pair_dropped(tiny_bert_dir, a, b) for a, b in pairs)
    assert main(["pair-attention", "--model", str(tiny_bert_dir), "--corpus", "mrpc", "--quiet", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["truncated"] == {"tokens_dropped": dropped} and dropped > 50
    assert [line for line in captured.err.splitlines() if "cut off" in line] == [
        f"warning: 1 of 4 examples are longer than the model reads (64 tokens): {dropped} word pieces at their ends "
        "were cut off and are not part of this view."]


@pytest.mark.parametrize("command", [["compare", "--a", "{m}", "--b", "{m}"], ["syntax-heads", "--model", "{m}"],
                                     ["head-features", "--model", "{m}"]])
def test_passes_that_skip_long_inputs_cut_nothing(command, tiny_bert_dir, tmp_path, capsys):
    """These leave a sentence longer than the model reads out (n_skipped) instead of cutting it: nothing is cut."""
    words = LONG.split()
    treebank = tmp_path / "t.conllu"
    treebank.write_text("".join(f"{i + 1}\t{w}\t{w}\tX\tX\t_\t{0 if i == 0 else 1}\t{'root' if i == 0 else 'dep'}\t_\t_\n"
                                for i, w in enumerate(words)) + "\n"
                        + "".join(f"1\t{det}\t{det}\tDET\tDT\t_\t2\tdet\t_\t_\n2\t{noun}\t{noun}\tNOUN\tNN\t_\t3\tnsubj\t_\t_\n"
                                  "3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_\n\n"
                                  for det, noun in (("the", "cat"), ("a", "dog"), ("the", "girl"))))
    argv = [a.replace("{m}", str(tiny_bert_dir)) for a in command] + ["--corpus", str(treebank), "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["truncated"] == {"tokens_dropped": 0} and "cut off" not in captured.err
    assert result.get("n_skipped", 0) == 1 or result.get("n_skipped_sentences", 0) == 1, result.keys()


def test_an_index_saved_before_cuts_were_counted_counts_them_again(tiny_bert_dir, tmp_path):
    """A neighbours index is a saved format: one written before "dropped" was stored still opens, and says what
    was cut (the corpus tokenized again, no forward pass)."""
    from core.data import corpus as corpora
    from core.model.loading import load_model
    from core.analyses.vector_index import build_token_index

    lm = load_model(str(tiny_bert_dir))
    path = tmp_path / "lines.txt"
    path.write_text(f"{SHORT}\n{LONG}\n")
    corpus = corpora.resolve(str(path))
    index = build_token_index(lm, corpus, [1])
    dropped = [0, _expected_dropped(tiny_bert_dir, LONG)]
    assert list(index.info.dropped) == dropped and index.info.max_length == 64
    info_file = index.folder / "info.json"
    old = json.loads(info_file.read_text())
    del old["dropped"], old["max_length"]
    info_file.write_text(json.dumps(old))
    reopened = build_token_index(lm, corpus, [1])
    assert reopened.folder == index.folder and list(reopened.info.dropped) == dropped
    assert reopened.info.truncation() == {"tokens_dropped": dropped[1]}


def test_counting_cuts_counts_each_input_once_in_its_block(tiny_bert_dir):
    """A pass that reads its corpus twice (or two models on one corpus) reports each input's cut once; outside
    the block nothing is counted."""
    from core.model.encoding import counting_cuts, encode
    from core.model.loading import load_model

    lm = load_model(str(tiny_bert_dir))
    dropped = _expected_dropped(tiny_bert_dir, LONG)
    with counting_cuts() as cuts:
        encode(lm, [SHORT, LONG], attentions=False)
        encode(lm, [LONG], attentions=False)
    encode(lm, [LONG + " the end"], attentions=False)
    assert sorted(cuts.dropped) == [0, dropped] and cuts.max_length == 64
    assert cuts.truncation() == {"tokens_dropped": dropped}
    assert cuts.truncation_notice().startswith(f"1 of 2 examples are longer than the model reads (64 tokens): {dropped} ")
