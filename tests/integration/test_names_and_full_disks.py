"""Issue 44, items 5 and 6 on the command line: a saved name is refused before any work (`--overwrite` replaces it
only once the new one is complete, and a kill between the two renames loses neither), a second `sae-train` of the
same name is refused with a sentence, and a full disk during `finetune`, `fit-mlm-head`, `sae-train` or
`fit-tuned-lens` says "disk full" and where, exit 2, no traceback."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors import SafetensorError

from core import files, settings
from core.__main__ import main
from core.analyses import sparse_features as sf
from core.model import artefacts
from core.model.loading import load_model
from core.training import list_runs
from core.training.runs import clean_leftovers
from tests.conftest import make_tiny_bert
from tests.tiny_mlm import make_tiny_mlm

WORDS = "the a cat dog man woman girl boy sat ran on in at to of mat river bank park house tree".split()
NO_SPACE = (errno.ENOSPC, "No space left on device")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("faults")
    rng = np.random.default_rng(4)
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(" ".join(rng.choice(WORDS, int(rng.integers(4, 9)))) + " ." for _ in range(80)) + "\n")
    rows = [{"text": f"the {animal} sat on the mat", "label": animal} for animal in ["cat", "dog"] * 12]
    task = root / "animals.jsonl"
    task.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"encoder": str(make_tiny_bert(root / "encoder")), "mlm": str(make_tiny_mlm(root / "mlm")),
            "corpus": str(corpus), "task": str(task)}


def command(kind: str, m: dict, name: str, *extra: str) -> list[str]:
    """The four writers' command lines, each as small as it runs."""
    return {
        "sae-train": ["sae-train", "--model", m["encoder"], "--corpus", m["corpus"], "--layer", "1", "--features", "48",
                      "--k", "4", "--steps", "5", "--out", name],
        "fit-mlm-head": ["fit-mlm-head", "--model", m["encoder"], "--corpus", m["corpus"], "--steps", "5", "--out", name],
        "fit-tuned-lens": ["fit-tuned-lens", "--model", m["mlm"], "--corpus", m["corpus"], "--steps", "3", "--out", name],
        "finetune": ["finetune", "--model", m["encoder"], "--task", m["task"], "--run", name, "--epochs", "1",
                     "--batch-size", "8", "--max-length", "16", "--threads", "1"],
    }[kind] + ["--quiet", *extra]


def saved_folder(kind: str, name: str) -> Path:
    return {"sae-train": artefacts.artefact_dir("sae"), "fit-mlm-head": artefacts.heads_dir(),
            "fit-tuned-lens": artefacts.artefact_dir("tuned-lens"), "finetune": settings.runs_dir()}[kind] / name


def refused(argv: list[str], capsys) -> str:
    """`python -m core ARGV` in this process: exit 2 and one line on stderr, no traceback; returns the line."""
    code = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("Loading weights")]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, err)
    return lines[0]


def fingerprint(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


# ---- names checked first ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["sae-train", "fit-mlm-head", "fit-tuned-lens"])
def test_a_saved_name_is_refused_before_any_work(kind, models, capsys, monkeypatch):
    # Before: both trained to the end, then failed with "[Errno 39] Directory not empty" and left .NAME.training.
    folder = saved_folder(kind, "taken")
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")

    def no_work(*args, **kwargs):
        raise AssertionError("a model was loaded for a name that is taken")

    for module in ("core.commands.sae", "core.training.mlm_head", "core.commands.layer_lens"):
        monkeypatch.setattr(f"{module}.load_model", no_work)
    line = refused(command(kind, models, "taken"), capsys)
    assert "'taken' is saved already" in line and str(folder) in line and "--overwrite" in line
    assert fingerprint(folder) == {"config.json": b"{}"}
    assert [p.name for p in folder.parent.iterdir()] == ["taken"]  # no .taken.training, no temporary


@pytest.mark.parametrize("kind", ["sae-train", "fit-mlm-head", "fit-tuned-lens"])
def test_overwrite_replaces_a_saved_name_whole(kind, models, capsys):
    assert main(command(kind, models, "again", "--seed", "1")) == 0
    folder = saved_folder(kind, "again")
    first = fingerprint(folder)
    assert main(command(kind, models, "again", "--seed", "2", "--overwrite")) == 0
    second = fingerprint(folder)
    assert set(second) == set(first) and second != first  # the new one, whole
    assert [p.name for p in folder.parent.iterdir() if not p.name.endswith(".lock")] == ["again"]  # no old one aside
    capsys.readouterr()


def test_a_kill_between_moving_the_old_lens_aside_and_the_new_one_in_loses_neither(models, capsys):
    # Before: re-fitting deleted the old lens, then renamed the new one in; a kill in between lost both.
    assert main(command("fit-tuned-lens", models, "kept", "--seed", "1")) == 0
    folder = saved_folder("fit-tuned-lens", "kept")
    old = fingerprint(folder)
    env = {**os.environ, files.PAUSE_ASIDE_ENV: "kept"}
    child = subprocess.Popen([sys.executable, "-m", "core", *command("fit-tuned-lens", models, "kept", "--seed", "2",
                                                                      "--overwrite")],
                             cwd=settings.REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             start_new_session=True)
    try:
        deadline = time.time() + 240
        while not list(folder.parent.glob(".kept.*.old")) and child.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        assert list(folder.parent.glob(".kept.*.old")), child.stderr.read().decode() if child.poll() is not None else ""
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert not folder.exists()  # the worst moment: the old lens aside, the new one under its temporary name
    clean_leftovers()  # what every start does
    assert fingerprint(folder) == old
    assert [p.name for p in folder.parent.iterdir()] == ["kept"]
    assert main(["lens", "--model", models["mlm"], "--text", "the cat sat .", "--kind", "tuned", "--lens", "kept",
                 "--json", "--quiet"]) == 0
    capsys.readouterr()


# ---- one training per SAE name ---------------------------------------------------------------------------------
def test_a_second_sae_training_of_the_same_name_is_refused_with_a_sentence(models, capsys):
    # Before: both wrote .NAME.training; one failed with FileExistsError / ENOTEMPTY (or a missing state.json).
    with sf.training_lock("busy"):
        child = subprocess.run([sys.executable, "-m", "core", *command("sae-train", models, "busy")],
                               cwd=settings.REPO_ROOT, capture_output=True, text=True, timeout=300)
        with pytest.raises(sf.SaeError, match="another training of 'busy' is running"):
            sf.train_sae(load_model(models["encoder"]), ["the cat sat ."] * 20, 1,
                         sf.TrainSettings(features=48, k=4, steps=2), "busy")
    lines = [line for line in child.stderr.splitlines() if line.strip() and not line.startswith("Loading weights")]
    assert child.returncode == 2 and lines == ["error: another training of 'busy' is running: wait for it to finish, "
                                               "or pick another name"], child.stderr
    assert not sf.state_dir("busy").exists()
    assert main(command("sae-train", models, "busy")) == 0  # free again once the first one ends
    capsys.readouterr()


# ---- a full disk -----------------------------------------------------------------------------------------------
def _full_disk(monkeypatch, kind: str) -> None:
    """The writer each command saves its result with fails as a full disk makes it fail: an OSError with errno
    ENOSPC (and no file name, as write(2) gives it), or safetensors' Rust error carrying "os error 28"."""

    def os_full(*args, **kwargs):
        raise OSError(*NO_SPACE)

    def rust_full(*args, **kwargs):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    if kind == "sae-train":
        monkeypatch.setattr("core.analyses.sparse_features.save_file", os_full)
    elif kind == "fit-tuned-lens":
        monkeypatch.setattr("core.analyses.logit_lens.save_file", rust_full)
    elif kind == "fit-mlm-head":
        monkeypatch.setattr("transformers.modeling_utils.PreTrainedModel.save_pretrained", os_full)
    else:
        monkeypatch.setattr("core.training.engine.save_classifier", os_full)


@pytest.mark.parametrize("kind", ["sae-train", "fit-mlm-head", "fit-tuned-lens", "finetune"])
def test_a_full_disk_says_disk_full_and_where(kind, models, capsys, monkeypatch):
    # Before: "[Errno 28] No space left on device" with no file, or a SafetensorError traceback.
    _full_disk(monkeypatch, kind)
    line = refused(command(kind, models, "full"), capsys)
    assert line.startswith("error: disk full: could not write ") and str(settings.cache_dir()) in line, line
    assert not saved_folder(kind, "full").exists()
    assert not list(settings.cache_dir().rglob("*.tmp"))
    if kind == "finetune":
        [run] = list_runs()
        assert run.state == "failed" and run.error.startswith("disk full") and ".full.partial" in run.error
        assert not list(settings.runs_dir().rglob("*.safetensors"))


def _namespaces_work() -> bool:
    unshare = shutil.which("unshare")
    return bool(unshare) and subprocess.run([unshare, "-rm", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _namespaces_work(), reason="needs unshare -rm (user and mount namespaces) for a small tmpfs")
def test_a_real_full_disk_during_sae_train(models, tmp_path):
    """A real full disk: the models cache on a 64 KB tmpfs (in a mount namespace of the test's own, no root)."""
    cache = tmp_path / "small-cache"
    cache.mkdir()
    argv = " ".join(f"'{a}'" for a in command("sae-train", models, "full"))
    script = f"mount -t tmpfs -o size=64k tmpfs '{cache}' && exec '{sys.executable}' -m core {argv}"
    child = subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=settings.REPO_ROOT, capture_output=True,
                           text=True, timeout=300, env={**os.environ, "BERTLENS_CACHE": str(cache)})
    lines = [line for line in child.stderr.splitlines() if line.strip() and not line.startswith("Loading weights")]
    assert child.returncode == 2 and len(lines) == 1, child.stderr
    assert lines[0].startswith(f"error: disk full: could not write {cache}/saes/"), lines[0]
