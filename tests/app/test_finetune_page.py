"""The fine-tuning page with two finished runs of a tiny model: runs table, comparison, confusion, predictions."""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import numpy as np

from core import jobs
from tests.app.conftest import FakeProcess
import pytest
from streamlit.testing.v1 import AppTest

from core.safe_text import markdown_text
from core.training import Recipe, finetune, load_classifier

PAGE = "app_pages/finetune.py"


@pytest.fixture
def two_runs(tiny_bert_dir, tmp_path):
    rng = random.Random(0)
    path = tmp_path / "animals.csv"
    lines = ["text,label"]
    for _ in range(200):
        animal = rng.choice(["cat", "dog"])
        lines.append(f"the {animal} sat on the mat,{animal}")
    path.write_text("\n".join(lines) + "\n")
    base = Recipe(model=str(tiny_bert_dir), task=str(path), run_name="tiny-all", epochs=2, lr=1e-3, batch_size=16,
                  max_length=16, cpu_threads=1)
    return [finetune(base), finetune(base.replace(run_name="tiny-minus-last", drop_last_layers=1))]


@pytest.fixture
def page(make_app, tiny_bert_dir):
    def opened() -> AppTest:
        at = make_app(str(tiny_bert_dir), "the cat sat on the mat")
        at.switch_page(PAGE)
        return at.run()

    return opened


def test_page_without_runs_offers_the_form(page, monkeypatch, tiny_bert_dir):
    # No real worker: the "process" is this test's own (alive) pid, so the runs stay queued.
    fake = FakeProcess
    monkeypatch.setattr("core.jobs.subprocess.Popen", lambda command, **kw: fake())
    at = page()
    assert not at.exception
    assert at.title[0].value == "Fine-tuning comparison"
    assert any("No runs yet" in i.value for i in at.info)
    preset = at.button(key="finetune.preset_go")
    assert preset.label == "Launch the three runs"
    box = at.selectbox(key="finetune.preset_model")
    model = box.value
    assert model == str(tiny_bert_dir) and box.options[box.index] == tiny_bert_dir.name  # its display name
    preset.click().run()
    assert not at.exception
    from core.training import list_runs

    recipes = sorted((r.recipe for r in list_runs()), key=lambda r: r["run_name"])
    assert [r["run_name"].rsplit("-", 2)[-2:] for r in recipes] == [["all", "layers"], ["freeze", "last"],
                                                                     ["minus", "last"]]
    assert [r.get("drop_last_layers") or 0 for r in recipes] == [0, 0, 1]
    # The freeze arm freezes the model's last layer, read from its own config (the tiny BERT has two).
    from transformers import AutoConfig

    last = AutoConfig.from_pretrained(model).num_hidden_layers - 1
    assert [list(r.get("frozen_layers") or []) for r in recipes] == [[], [last], []]
    assert all(r["model"] == model and r["task"] == "snli" for r in recipes)


def test_page_compares_finished_runs_and_predicts(page, two_runs):
    at = page()
    assert not at.exception
    frames = [d.value for d in at.dataframe]
    assert frames[0]["test accuracy %"].tolist() == [90.45, 90.33, 58.91, 58.67]  # the slides' reference
    runs = frames[1]
    assert list(runs["run"]) == ["tiny-all", "tiny-minus-last"]
    assert list(runs["layers"]) == [2, 1]
    np.testing.assert_allclose(runs["accuracy"], [m["accuracy"] for m in two_runs])

    assert at.multiselect(key="finetune.compare").value == ["tiny-all", "tiny-minus-last"]
    side = frames[2]
    assert list(side.columns) == ["tiny-all", "tiny-minus-last"]
    assert float(side.loc["accuracy", "tiny-all"]) == pytest.approx(two_runs[0]["accuracy"], abs=1e-4)
    assert float(side.loc["F1 dog", "tiny-minus-last"]) == pytest.approx(two_runs[1]["per_class_f1"]["dog"], abs=1e-4)
    assert side.loc["layers"].tolist() == ["2", "1"]

    # The probabilities shown are those of the saved classifiers.
    shown = frames[3]
    expected = load_classifier("tiny-all").predict_proba([("the cat sat on the mat", None)])[0]
    np.testing.assert_allclose(shown.loc["tiny-all", ["cat", "dog"]].to_numpy(dtype=float), expected, rtol=1e-4)


def test_classifying_a_long_sentence_says_what_was_cut(tiny_bert_dir, two_runs):
    """Issue 32: "Classify the sidebar's sentences" cut a long sentence (from a link's ?a=) to the model's length
    without a word. Both runs share one base model, so one notice; its count is the tokenizer's own."""
    from streamlit.testing.v1 import AppTest
    from transformers import AutoTokenizer

    from tests.app.conftest import APP_FILE

    long = " ".join(["the cat sat on the mat ."] * 20)
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    dropped = len(tokenizer(long, truncation=False)["input_ids"]) - 64  # the tiny model reads 64 positions
    assert dropped > 50
    at = AppTest.from_file(APP_FILE, default_timeout=180)
    at.query_params["model"] = str(tiny_bert_dir)
    at.query_params["a"] = long
    at.switch_page(PAGE).run()
    assert not at.exception
    cut = [w.value for w in at.warning if "cut off" in w.value]
    assert cut == [f"The input is longer than the model reads (64 tokens): {dropped} word pieces at its end were cut "
                   "off and are not part of this view."]
    shown = next(d.value for d in at.dataframe if d.value.index.name == "run")
    expected = load_classifier("tiny-all").predict_proba([(long, None)])[0]
    np.testing.assert_allclose(shown.loc["tiny-all", ["cat", "dog"]].to_numpy(dtype=float), expected, rtol=1e-4)

    at.sidebar.text_area(key="sentence_a").set_value("the cat sat on the mat").run()
    assert not at.exception and not [w for w in at.warning if "cut off" in w.value]


def test_form_reports_a_bad_recipe_and_queues_a_good_one(page, tiny_bert_dir, two_runs, monkeypatch):
    launched = []
    # No real worker: the "process" is this test's own (alive) pid, so the run stays queued.
    fake = FakeProcess
    monkeypatch.setattr("core.jobs.subprocess.Popen", lambda command, **kw: launched.append(command) or fake())
    at = page()
    at.text_input(key="finetune.run_name").input("tiny-all")
    at.button(key="FormSubmitter:finetune.form-Queue run").click().run()
    assert any("already exists" in e.value for e in at.error)
    at.text_input(key="finetune.run_name").input("fresh-run")
    at.button(key="FormSubmitter:finetune.form-Queue run").click().run()
    assert not at.exception
    assert any(f"Queued {markdown_text('fresh-run')}" in s.value for s in at.success)
    # One job of the one runner: `python -m core.jobs ID`, whose work trains from the run folder's recipe.json.
    assert launched and launched[0][-3:-1] == ["-m", "core.jobs"]
    work = jobs.read_record(launched[0][-1]) and json.loads((jobs.jobs_dir() / launched[0][-1] / jobs.WORK).read_text())
    assert work["function"] == "core.training.jobs:train_recipe_file"
    recipe = json.loads(open(work["args"][0]).read())
    assert recipe["task"] == "snli" and recipe["train_limit"] == 2000 and recipe["model"] == str(tiny_bert_dir)
    at.run()
    assert any("fresh-run" in m.value and "waiting" in m.value for m in at.markdown)


def test_paper_protocol_switch_launches_the_slides_recipe_on_the_test_split(page, monkeypatch):
    fake = FakeProcess
    monkeypatch.setattr("core.jobs.subprocess.Popen", lambda command, **kw: fake())
    at = page()
    assert at.toggle(key="finetune.paper_protocol").value is False
    assert at.dataframe[0].value["eval split"].tolist() == ["test"] * 4  # the slides' numbers say their split
    at.toggle(key="finetune.paper_protocol").set_value(True).run()
    assert not at.exception
    assert any(c.value.startswith("Protocol: CS4650 slides") for c in at.caption)
    tables = [d.value for d in at.dataframe if "setting" in d.value.columns]
    slides = {row["setting"]: row["source"] for row in tables[0].to_dict("records")}  # slides first, then Gao
    assert slides["schedule"] == "not stated in slides; none used"
    assert {row["setting"]: row["value"] for row in tables[1].to_dict("records")}["mlp_in_training"] == "True"
    at.button(key="finetune.preset_go").click().run()
    assert not at.exception
    from core.training import list_runs

    recipes = sorted((r.recipe for r in list_runs()), key=lambda r: r["run_name"])
    assert [r["protocol"] for r in recipes] == ["slides", "slides", "slides"]
    assert all(r["eval_split"] == "test" and r["eval_limit"] is None and r["weight_decay"] == 0.0 for r in recipes)
    assert [r["head"] for r in recipes] == ["linear", "linear", "linear"]


def test_paper_protocol_switch_makes_unsupervised_simcse_follow_gao(page, monkeypatch):
    fake = FakeProcess
    monkeypatch.setattr("core.jobs.subprocess.Popen", lambda command, **kw: fake())
    at = page()
    at.toggle(key="finetune.paper_protocol").set_value(True).run()
    at.selectbox(key="finetune.objective").set_value("simcse-unsup")
    at.text_input(key="finetune.run_name").set_value("gao-run")
    at.number_input(key="finetune.lr").set_value(1e-4)  # ignored: the protocol fixes it
    at.button(key="FormSubmitter:finetune.form-Queue run").click().run()
    assert not at.exception and not at.error
    from core.training import get_run

    recipe = get_run("gao-run").recipe
    assert (recipe["protocol"], recipe["lr"], recipe["batch_size"], recipe["max_length"]) == ("gao", 3e-5, 64, 32)
    assert recipe["mlp_in_training"] is True


def test_form_freezes_a_layer_set_numbered_as_the_charts(page, monkeypatch):
    fake = FakeProcess
    monkeypatch.setattr("core.jobs.subprocess.Popen", lambda command, **kw: fake())
    at = page()
    at.text_input(key="finetune.run_name").input("frozen-run")
    label = at.text_input(key="finetune.freeze_spec").label  # one wording with the bias form (issue 48)
    assert label.startswith("Freeze layers") and "0-based" not in label
    at.text_input(key="finetune.freeze_spec").input("1-0")
    at.button(key="FormSubmitter:finetune.form-Queue run").click().run()
    assert any("runs backwards" in e.value for e in at.error)
    at.text_input(key="finetune.freeze_spec").input("0-2")  # the embeddings and layers 1, 2 (core.numbering)
    at.button(key="FormSubmitter:finetune.form-Queue run").click().run()
    assert not at.exception
    from core.training import get_run

    recipe = get_run("frozen-run").recipe
    assert list(recipe["frozen_layers"]) == [0, 1] and recipe["freeze_embeddings"]


def test_drug_rating_task_is_offered_with_what_differs(page):
    at = page()
    assert not at.exception
    from core.training.tasks import TASK_TITLES

    # Options are shown by their titles.
    assert {TASK_TITLES["drugs-rating"], TASK_TITLES["drugs-rating3"]} <= set(at.selectbox(key="finetune.task").options)
    assert "drugs-rating" in at.selectbox(key="finetune.preset_task").options
    from core.training.tasks import DRUG_RATING_DIFFERENCES

    shown = " ".join(m.value for m in at.markdown)
    assert "satisfaction" in shown and all(line in shown for line in DRUG_RATING_DIFFERENCES)


def test_processes_and_lr_decay_fields_go_into_the_recipe(page, monkeypatch):
    launched = []
    fake = FakeProcess
    monkeypatch.setattr("core.jobs.subprocess.Popen", lambda command, **kw: launched.append(command) or fake())
    monkeypatch.setattr("app_pages.finetune.visible_gpus", lambda: 0)
    at = page()
    assert at.number_input(key="finetune.processes").value == 1
    at.number_input(key="finetune.processes").set_value(2)
    at.number_input(key="finetune.accumulation").set_value(4)
    assert at.number_input(key="finetune.lr_decay").value == 1.0  # off unless asked for
    at.number_input(key="finetune.lr_decay").set_value(0.95)
    at.text_input(key="finetune.run_name").input("two-procs")
    at.button(key="FormSubmitter:finetune.form-Queue run").click().run()
    assert not at.exception
    work = json.loads((jobs.jobs_dir() / launched[0][-1] / jobs.WORK).read_text())
    recipe = json.loads(open(work["args"][0]).read())
    assert recipe["processes"] == 2 and recipe["gradient_accumulation"] == 4 and recipe["lr_decay"] == 0.95


def test_runs_table_and_progress_line_say_the_same_phase(page, monkeypatch):
    """Issue 37: the table said "queued" while the progress line said "loading model", and the line began with
    "loss nan, 0.0 examples/s". The worker is faked: its status.json is written here as the engine writes it."""
    from core.training import runs

    fake = FakeProcess
    monkeypatch.setattr("core.jobs.subprocess.Popen", lambda command, **kw: fake())
    at = page()
    at.text_input(key="finetune.run_name").input("phase-run")
    at.button(key="FormSubmitter:finetune.form-Queue run").click().run()
    table = next(d.value for d in at.dataframe if "run" in d.value.columns)
    assert table.set_index("run").loc["phase-run", "state"] == "queued"

    folder = runs.RunFolder("phase-run")
    folder.write_status(state="running", phase="loading model", pid=os.getpid(), step=0, loss=None,
                        examples_per_second=0.0)
    at.run()
    table = next(d.value for d in at.dataframe if "run" in d.value.columns)
    assert table.set_index("run").loc["phase-run", "state"] == "loading model"
    (line,) = [p.proto.text for p in at.get("progress") if "phase-run" in p.proto.text]
    assert "loading model…" in line and "nan" not in line and "examples/s" not in line

    folder.write_status(phase="training", step=4, total_steps=8, epoch=1, epochs=2, loss=0.5, examples_per_second=9.0)
    at.run()
    table = next(d.value for d in at.dataframe if "run" in d.value.columns)
    assert table.set_index("run").loc["phase-run", "state"] == "training"
    (line,) = [p.proto.text for p in at.get("progress") if "phase-run" in p.proto.text]
    assert "step 4/8" in line and "loss 0.5000" in line and "9.0 examples/s" in line


class _Upload:
    """What st.file_uploader returns for one file. AppTest cannot upload, so the page's uploader is replaced by one
    that always holds this file."""

    def __init__(self, name: str, data: bytes):
        self.name, self._data = name, data

    def getvalue(self) -> bytes:
        return self._data


def test_an_uploaded_file_is_never_dropped_and_its_errors_name_it(page, monkeypatch):
    """Issue 48: a CSV uploaded while Task was still SNLI was ignored and an SNLI run started without a word; with
    Task = My file, a bad file's error named our saved copy ("1795871913-wrong_cols.csv")."""
    from core.training import list_runs
    from tests.markdown_text import plain

    monkeypatch.setattr("core.jobs.subprocess.Popen", lambda command, **kw: FakeProcess())
    upload = _Upload("wrong_cols.csv", b"sentence,category\nthe cat sat,a\nthe dog ran,b\nthe cat ran,a\n")
    monkeypatch.setattr("streamlit.file_uploader", lambda *args, **kwargs: upload)
    at = page()
    assert at.selectbox(key="finetune.task").value == "snli"
    at.text_input(key="finetune.run_name").input("upload-run")
    at.button(key="FormSubmitter:finetune.form-Queue run").click().run()
    assert not at.exception
    shown = [plain(e.value) for e in at.error]
    assert any("wrong_cols.csv" in e and "would not be used" in e and "My file" in e for e in shown), shown
    assert not list_runs()  # nothing started

    at.selectbox(key="finetune.task").set_value("my file")
    at.button(key="FormSubmitter:finetune.form-Queue run").click().run()
    shown = [plain(e.value) for e in at.error]
    assert any(e.startswith("wrong_cols.csv") for e in shown), shown
    assert not any(re.search(r"\d+-wrong_cols", e) for e in shown), shown
    assert not list_runs()

    upload.name, upload._data = "animals.csv", "".join(
        ["text,label\n"] + [f"the {a} sat on the mat,{a}\n" for a in ["cat", "dog"] * 20]).encode()
    at.button(key="FormSubmitter:finetune.form-Queue run").click().run()
    assert not at.exception and not at.error
    task = Path(list_runs()[0].recipe["task"])
    assert task.name == "animals.csv" and task.read_bytes() == upload.getvalue()
    at.run()  # the runs table names the file as the user did, not where it is kept
    runs = next(d.value for d in at.dataframe if "task" in d.value.columns)
    assert runs["task"].tolist() == ["animals.csv"]
