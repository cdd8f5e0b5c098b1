"""compare and probe declared once (core.analyses.changes): the lens twins give what the CLI's --json prints, the
settings keep their old spellings, and a bad --layers is refused before any treebank or model is read."""

from __future__ import annotations

import pytest

from core import lens
from core.__main__ import main
from tests.cli_json import as_printed, cli_json


def test_compare_twin_gives_the_cli_json(tiny_bert_dir, tmp_path, capsys):
    from tests.conftest import make_tiny_bert

    other = str(make_tiny_bert(tmp_path / "other", seed=5))
    expected = cli_json(capsys, "compare", "--model", str(tiny_bert_dir), "--model", other, "--corpus", "builtin",
                        "--limit", "12", "--max-words", "40", "--seed", "3", "--protocol", "merchant")
    data = lens.compare(str(tiny_bert_dir), other, "builtin", limit=12, max_words=40, seed=3, protocol="merchant",
                        return_data=True)
    assert as_printed(data.to_json()) == expected
    assert expected["protocol"] == "merchant" and expected["seed"] == 3 and "truncated" in expected
    chart, frame = data
    assert chart.to_dict() and len(frame) == 2 * len(expected["layers"])


def test_probe_twin_gives_the_cli_json(tiny_bert_dir, data_dir, capsys):
    argv = ["probe", "--model", str(tiny_bert_dir), "--corpus", "ud:dev:24", "--layers", "0,2", "--epochs", "2",
            "--rank", "4", "--lr", "0.002", "--seed", "1", "--no-cache"]
    expected = cli_json(capsys, *argv)
    data = lens.probe(str(tiny_bert_dir), "ud:dev:24", layers="0,2", epochs=2, rank=4, lr=0.002, seed=1,
                      use_cache=False, return_data=True)
    assert as_printed(data.to_json()) == expected
    assert expected["layers"] == [0, 2] and expected["settings"]["rank"] == 4
    assert expected["settings"]["learning_rate"] == 0.002
    chart, frame = data
    assert chart.to_dict() and list(frame["layer"]) == [0, 2]


def test_bad_probe_layers_fail_before_anything_is_read(tiny_bert_dir, capsys):
    # No treebank or model is read for a misspelt layer list: the missing file and model are never reached.
    assert main(["probe", "--model", "no-such-model", "--corpus", "no-such.conllu", "--layers", "0,x"]) == 2
    err = capsys.readouterr().err
    assert "--layers '0,x'" in err and "no-such" not in err
    with pytest.raises(ValueError, match="this model has layers 0 to"):
        lens.probe(str(tiny_bert_dir), "ud:dev:10", layers="55")
