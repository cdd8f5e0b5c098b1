"""A study with no model, for testing the reproduce CLI, page and chart without a download: it "measures" a
known curve (the paper's own values plus a chosen shift), reporting progress and honouring cancel."""

from __future__ import annotations

import time

from core import references, studies
from core.progress import check_stop
from core.references import Reference

STEP_SECONDS = 0.0  # a test that cancels sets it higher
SEED_SHIFT = 0.0  # a test of a seeds run on the page sets it: the page has no --set
PAPER_CURVE = {0: 0.10, 1: 0.20, 2: 0.35, 3: 0.30}
PAPER_TABLE = {"full": 0.90, "biased": 0.59}
CURVE = Reference(key="fake.curve", study="fake", measure="random_cosine", label="Fake paper, Figure 1", model="fake-bert",
                  corpus="fake corpus", unit="token", protocol="ethayarajh", source="tests/fake_study.py",
                  values=PAPER_CURVE, tolerance=0.02)
TABLE = Reference(key="fake.table", study="fake", measure="accuracy", label="Fake paper, Table 2", model="fake-bert",
                  corpus="fake corpus", unit="sentence pair", protocol="ethayarajh", source="tests/fake_study.py",
                  values=PAPER_TABLE, tolerance=0.01)


def run(options: studies.StudyOptions, progress=None, should_stop=None) -> studies.StudyResult:
    model = options.model or "fake-bert"
    # seed_shift moves the curve by seed_shift x seed: seeds that measure different values, for seeds runs.
    shift = float(options.extra.get("shift", 0.0)) + float(options.extra.get("seed_shift", SEED_SHIFT)) * options.seed
    steps = int(options.limit or 3)
    for step in range(steps):
        check_stop(should_stop)
        time.sleep(float(options.extra.get("sleep", STEP_SECONDS)))
        if progress:
            progress(step + 1, steps)
    curve = {k: v + shift for k, v in PAPER_CURVE.items()}
    table = {k: v + shift for k, v in PAPER_TABLE.items()}
    return studies.StudyResult(
        study="fake", model=model, corpus=options.corpus or "fake corpus", protocol="ethayarajh",
        comparisons=(references.compare(CURVE, curve, model, "ethayarajh"), references.compare(TABLE, table, model, "ethayarajh")),
        measured={"random_cosine": curve, "extra_measure": {0: 1.0, 1: 2.0}}, notes=("Fake data: for tests only.",),
        degenerate=studies.degeneracy_of(model),  # when the "model" is a classification run
        heads=(studies.HeadRank("fake head", "1-2", head_rank(options.seed), 12),),
    )


def head_rank(seed: int) -> int:
    """The fake head's rank: 1, 4, 7, ... for seeds 0, 1, 2, ..."""
    return 1 + 3 * seed


STUDY = studies.Study(
    name="fake", title="Fake et al. (2000), a study for tests", model="fake-bert", data="fake corpus", stand_in=None,
    default_corpus="builtin", protocol="ethayarajh", cost_cpu="1 s", cost_gpu="1 s", summary="Checks the machinery.", run=run,
)


def install(monkeypatch) -> None:
    """Make `fake` the first study of core.studies for this test, with its model "fake-bert" on disk (a run folder
    in the test's own models_cache: the Reproduce page offers only models that load now; nothing reads its weights)."""
    from core import settings

    folder = settings.runs_dir() / "fake-bert"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "model.safetensors").write_bytes(b"")
    real_get = studies.get
    monkeypatch.setattr(studies, "NAMES", ("fake", *studies.NAMES))
    monkeypatch.setattr(studies, "get", lambda name: STUDY if name == "fake" else real_get(name))
