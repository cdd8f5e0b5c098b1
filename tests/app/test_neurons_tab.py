"""AppTest of the Read-the-layers page's Neurons tab on a tiny random BERT: after the corpus job, the neuron list,
the top contexts and the sentence shading hold core.analyses.neurons' numbers; a link with neuron_layer and neuron
reopens the same neuron; a second model gives the ranking by change."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core import jobs
from core.analyses import neurons as nr
from core.data import corpus as corpora
from core.data.sources import BUILTIN, named_spec
from core.model.loading import load_model
from tests.app.conftest import APP_FILE, chart_rows_titled
from tests.app.test_url_state import open_link
from tests.conftest import make_tiny_bert

TEXT = "the man sat on the bank ."


def settle(at: AppTest, key: str) -> AppTest:
    """Wait for the tab's corpus job `key`, then draw its result."""
    assert not at.exception, at.exception
    state = f"neurons.{key}.jobstate"
    while state in at.session_state and at.session_state[state].get("id"):
        assert jobs.wait(at.session_state[state]["id"], timeout=240).state == "done"
        at.run()
        assert not at.exception, at.exception
    return at


def run_pass(at: AppTest, key: str = "index") -> AppTest:
    at.button(key=f"neurons.{key}.run").click().run()
    return settle(at, key)


def test_the_tab_shows_the_indexs_numbers(tiny_bert_dir):
    at = AppTest.from_file(APP_FILE, default_timeout=240)
    at.session_state["model"] = str(tiny_bert_dir)
    at.session_state["sentence_a"] = TEXT
    at.session_state["neurons.layer"] = 2
    at.switch_page("app_pages/layers.py").run()
    assert not at.exception, at.exception
    run_pass(at)
    lm = load_model(str(tiny_bert_dir))
    index = nr.build_neuron_index(lm, corpora.resolve(named_spec(BUILTIN)), 2)  # read back from the job's folder
    listed = chart_rows_titled(at, "with the highest activation")
    assert [r["neuron"] for r in listed] == index.by_max()[:20].tolist()
    np.testing.assert_allclose([r["max activation"] for r in listed], index.max_activation[index.by_max()[:20]])
    neuron = int(index.by_max()[0])
    assert at.session_state["neurons.neuron"] == neuron
    contexts = chart_rows_titled(at, f"Top contexts of neuron {neuron}")
    expected = index.contexts(neuron)
    assert [(r["example"], r["position"]) for r in contexts] == [(c.example, c.position) for c in expected]
    np.testing.assert_allclose([r["activation"] for r in contexts], [c.value for c in expected], atol=1e-6)
    shaded = chart_rows_titled(at, f"Neuron {neuron} of layer 2 on your sentence")
    sentence = nr.neuron_sentence(lm, TEXT, 2)
    assert [r["token"] for r in shaded] == list(sentence.tokens)
    np.testing.assert_allclose([r["activation"] for r in shaded], sentence.of(neuron), atol=1e-6)
    # another neuron: its contexts and shading, no new pass
    at.number_input(key="neurons.neuron").set_value(7).run()
    assert not at.exception, at.exception
    np.testing.assert_allclose([r["activation"] for r in chart_rows_titled(at, "Top contexts of neuron 7")],
                               [c.value for c in index.contexts(7)], atol=1e-6)
    # the link of this view reopens layer and neuron in a fresh session (the index is on disk: no Run needed
    # beyond following the finished job)
    link = open_link("layers", {"model": str(tiny_bert_dir), "a": TEXT, "neuron_layer": "2", "neuron": "7"})
    assert link.session_state["neurons.layer"] == 2 and link.session_state["neurons.neuron"] == 7


def test_ranking_by_change_uses_the_second_models_pass(tiny_bert_dir, tmp_path, monkeypatch):
    from core.model import loading

    other = make_tiny_bert(tmp_path / "other", seed=1)
    monkeypatch.setattr(loading, "available_models", lambda: [loading.ModelEntry(str(other), "run", str(other))])
    monkeypatch.setattr("app_pages.widgets.neurons.available_models", loading.available_models, raising=False)
    at = AppTest.from_file(APP_FILE, default_timeout=240)
    at.session_state["model"] = str(tiny_bert_dir)
    at.session_state["sentence_a"] = TEXT
    at.session_state["neurons.layer"] = 1
    at.session_state["neurons.by"] = "change"
    at.switch_page("app_pages/layers.py").run()
    assert not at.exception, at.exception
    run_pass(at)
    assert at.session_state["neurons.b"] == str(other)
    run_pass(at, "index_b")
    corpus = corpora.resolve(named_spec(BUILTIN))
    changes = nr.neuron_changes(nr.build_neuron_index(load_model(str(tiny_bert_dir)), corpus, 1),
                                nr.build_neuron_index(load_model(str(other)), corpus, 1))
    rows = chart_rows_titled(at, "that changed most")
    assert [r["neuron"] for r in rows] == changes.order[:20].tolist()
    np.testing.assert_allclose([r["change"] for r in rows], changes.effect[changes.order[:20]])


def test_the_corpus_pass_shows_progress_and_cancels(minilm_dir, isolated_cache):
    from tests.app.test_cancel_every_job import _app, _cancel_while_running

    at = _app(str(minilm_dir), "app_pages/layers.py", {"layers.tab": "Neurons", "neurons.layer": 3})
    _cancel_while_running(at, "neurons.index")
    assert not (isolated_cache / "neuron_index").exists() or not any((isolated_cache / "neuron_index").iterdir())
