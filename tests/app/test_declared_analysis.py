"""Issue 45's "done when": adding a tab-level analysis touches its analysis module, its chart and its test. Here a
throw-away analysis (token vector norms at one layer) is two files a test writes — the analysis module, in a folder
added to core.analyses' path, and its chart module — and nothing else is edited. It then has a CLI subcommand, a
core.lens function, URL parameters, a tab on the Read the layers page (settings, chart, export) and an entry in
`python -m core views --json`, each made from its one declaration, and each gives transformers' own numbers."""

from __future__ import annotations

import inspect
import json
import sys
import textwrap

import numpy as np
import pytest
import torch

from core import analyses, lens, views
from core.__main__ import main

ANALYSIS_MODULE = '''
from dataclasses import dataclass

import numpy as np

from core.contract import Analysis, setting
from core.model.encoding import encode


@dataclass(frozen=True)
class NormSettings:
    layer: int = setting(1, "the layer whose vectors are measured (0 = the embeddings)", low=0, high=64,
                         url="norm_layer", label="Layer")
    unit: bool = setting(False, "divide by the largest norm")


@dataclass(frozen=True)
class Norms:
    tokens: tuple
    norms: np.ndarray  # [T]
    layer: int

    def to_json(self):
        return {"layer": self.layer, "tokens": list(self.tokens), "norms": [round(float(v), 6) for v in self.norms]}


def token_norms(lm, inputs, settings, progress=None, should_stop=None):
    encoding = encode(lm, (inputs.text, inputs.text_b) if inputs.text_b else inputs.text, attentions=False)
    norms = np.linalg.norm(encoding.hidden_states[settings.layer], axis=-1)
    return Norms(encoding.tokens, norms / norms.max() if settings.unit else norms, settings.layer)


ANALYSIS = Analysis(name="throwaway-norms", view="layers", command="throwaway-norms", lens="throwaway_norms",
                    settings=NormSettings, run=token_norms, charts="throwaway_charts:norm_charts",
                    title="Vector norms", summary="how long each token's vector is at one layer",
                    inputs=("text",), tab="Norms")
'''

CHART_MODULE = '''
import altair as alt
import pandas as pd


def norm_charts(result):
    frame = pd.DataFrame({"token": [f"{i}·{t}" for i, t in enumerate(result.tokens)], "norm": result.norms})
    chart = alt.Chart(frame, title="Vector norm of every token").mark_bar().encode(x="token:N", y="norm:Q")
    return [(chart, f"Layer {result.layer}.")]
'''
TEXT = "the cat sat on the mat ."


@pytest.fixture
def throwaway(request, tmp_path, monkeypatch):
    view = getattr(request, "param", "layers")  # the view whose page gets the tab
    (tmp_path / "found").mkdir()
    (tmp_path / "found" / "throwaway_norms.py").write_text(
        textwrap.dedent(ANALYSIS_MODULE).replace('view="layers"', f'view="{view}"'))
    (tmp_path / "throwaway_charts.py").write_text(textwrap.dedent(CHART_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(analyses, "__path__", [*analyses.__path__, str(tmp_path / "found")])
    yield
    for name in ("core.analyses.throwaway_norms", "throwaway_charts"):
        sys.modules.pop(name, None)
    lens._DECLARED.pop("throwaway_norms", None)


def transformers_norms(folder, text: str, layer: int) -> np.ndarray:
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(str(folder)), AutoModel.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        states = model(**tokenizer(text, return_tensors="pt"), output_hidden_states=True).hidden_states
    return states[layer][0].norm(dim=-1).numpy()


def test_one_module_and_one_chart_make_the_cli_lens_url_and_json(throwaway, tiny_bert_dir, capsys):
    expected = transformers_norms(tiny_bert_dir, TEXT, 2)
    assert main(["throwaway-norms", "--model", str(tiny_bert_dir), "--text", TEXT, "--layer", "2", "--json",
                 "--quiet"]) == 0
    printed = json.loads(capsys.readouterr().out)
    np.testing.assert_allclose(printed["norms"], expected, atol=1e-5)
    assert printed["layer"] == 2 and printed["truncated"] == {"tokens_dropped": 0}

    data = lens.throwaway_norms(str(tiny_bert_dir), TEXT, layer=2, return_data=True)
    assert data.to_json() == {k: v for k, v in printed.items() if k != "truncated"}
    assert list(data[1]["norm"]) == pytest.approx(list(expected), abs=1e-5)  # the frame the chart draws
    parameters = inspect.signature(lens.throwaway_norms).parameters
    assert parameters["layer"].default == 1 and parameters["unit"].default is False
    with pytest.raises(ValueError, match="layer must be within 0…64"):
        lens.throwaway_norms(str(tiny_bert_dir), TEXT, layer=99)

    with pytest.raises(SystemExit) as refused:  # argparse refuses it before any model loads
        main(["throwaway-norms", "--text", TEXT, "--layer", "-1"])
    assert refused.value.code == 2
    assert "layer must be within 0…64" in capsys.readouterr().err

    by_name = {p.name: p for p in views.params_of("layers")}
    assert by_name["norm_layer"].key == "layers.throwaway-norms.layer" and by_name["norm_layer"].default == 1
    assert "Norms" in by_name["tab"].choices
    assert views.parse("layers", {"norm_layer": "3", "tab": "Norms"}).values == {
        "layers.throwaway-norms.layer": 3, "layers.tab": "Norms"}

    assert main(["views", "--json"]) == 0
    (listed,) = [a for a in json.loads(capsys.readouterr().out)["analyses"] if a["name"] == "throwaway-norms"]
    assert listed["view"] == "layers" and listed["lens"] == "throwaway_norms" and listed["tab"] == "Norms"
    assert [s["name"] for s in listed["settings"]] == ["layer", "unit"]


def test_its_tab_on_the_page_draws_transformers_numbers(throwaway, tiny_bert_dir, make_app):
    from tests.app.conftest import chart_rows_titled

    at = make_app(str(tiny_bert_dir), TEXT)
    at.query_params.update({"norm_layer": "2", "tab": "Norms"})
    at.switch_page("app_pages/layers.py").run()
    assert not at.exception, at.exception
    assert [t.label for t in at.tabs] == ["Lens", "Neurons", "Sparse features", "Norms"]
    assert at.number_input(key="layers.throwaway-norms.layer").value == 2
    rows = chart_rows_titled(at, "Vector norm of every token")
    np.testing.assert_allclose([r["norm"] for r in rows], transformers_norms(tiny_bert_dir, TEXT, 2), atol=1e-5)
    assert "Vector norms" in [h.value for h in at.subheader]

    at.toggle(key="layers.throwaway-norms.unit").set_value(True).run()  # a declared bool: a toggle
    assert max(r["norm"] for r in chart_rows_titled(at, "Vector norm of every token")) == pytest.approx(1.0)


@pytest.mark.parametrize("throwaway", ["attention"], indirect=True)
def test_on_the_attention_page_its_tab_runs_when_open(throwaway, tiny_bert_dir, make_app):
    """The attention page runs only its open tab (page_tabs(only_open=True)): the declared tab too."""
    from tests.app.conftest import chart_rows_titled

    at = make_app(str(tiny_bert_dir), TEXT)
    at.query_params.update({"norm_layer": "2", "tab": "Norms"})
    at.switch_page("app_pages/attention.py").run()
    assert not at.exception, at.exception
    assert [t.label for t in at.tabs][-1] == "Norms"
    rows = chart_rows_titled(at, "Vector norm of every token")
    np.testing.assert_allclose([r["norm"] for r in rows], transformers_norms(tiny_bert_dir, TEXT, 2), atol=1e-5)
