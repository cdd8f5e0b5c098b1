"""Tenney, Das & Pavlick (2019), "BERT rediscovers the classical NLP pipeline": the expected layer of each task,
and the order it gives (part of speech below dependencies).

The paper trains edge probes on a learnt scalar mix of BERT-large's layers (cumulative scoring over layers 0..l)
on OntoNotes and the English Web Treebank. Here the label probes of issue 49 (core.analyses.layer_knowledge.probes)
score one layer at a time, on UD English EWT (train on a seeded sample of dev, score on one of test), and the
expected layer is taken over the best accuracy up to each layer. Only the order of the two expected layers is
compared, as yes/no: "shape only" on any model but the paper's (and, with the probe differing, even on it).
"""

from __future__ import annotations

from core import references
from core.analyses import probe as probes
from core.analyses.layer_knowledge.probes import ANALYSIS, run_label_probes
from core.model.loading import load_model
from core.progress import ProgressCallback, StopCheck
from core.studies import Study, StudyOptions, StudyResult, half_progress

PAPER_MODEL = "bert-large-uncased"
PROTOCOL = "bertlens"
DEFAULT_TRAIN = 500
DEFAULT_CORPUS = f"ud:dev:{DEFAULT_TRAIN}"
TASKS = ("upos", "deprel")


def pos_below_dependencies(expected: dict[str, float | None]) -> float:
    """1.0 when upos's expected layer is below deprel's, else 0.0 (also when either is undefined)."""
    pos, deps = expected.get("upos"), expected.get("deprel")
    return 1.0 if pos is not None and deps is not None and pos < deps else 0.0


def run(options: StudyOptions, progress: ProgressCallback = None, should_stop: StopCheck = None) -> StudyResult:
    lm = load_model(options.model or PAPER_MODEL)
    n_train = options.limit or DEFAULT_TRAIN
    train = options.corpus or f"ud:dev:{n_train}"
    evaluation = f"ud:test:{max(10, n_train // 2)}"
    data = probes.probe_inputs(train, evaluation, options.seed)
    results = {}
    for k, task in enumerate(TASKS):
        settings = ANALYSIS.make({"task": task, "seed": options.seed})
        results[task] = run_label_probes(lm, data, settings, progress=half_progress(progress, k),
                                         should_stop=should_stop)
    expected = {task: r.expected_layer for task, r in results.items()}
    claim = {"part of speech below dependencies": pos_below_dependencies(expected)}
    comparison = references.compare(references.get("tenney.pos-below-dependencies"), claim, lm.ref, PROTOCOL)
    measured = {f"{task} accuracy": {s.layer: s.accuracy for s in r.layers} for task, r in results.items()}
    measured["expected layer"] = {task: value for task, value in expected.items() if value is not None}
    measured["expected layer / number of layers"] = {task: value / lm.num_layers for task, value in expected.items()
                                                     if value is not None}
    measured["finding"] = claim
    notes = (
        f"Label probes per layer on {len(data.train)} training and {len(data.eval)} evaluation sentences of UD "
        f"English EWT ({train} / {evaluation}); the paper used OntoNotes and the full English Web Treebank.",
        "The paper's expected layer comes from edge probes over a learnt scalar mix of layers 0..l (cumulative "
        "scoring); here one linear probe per layer, the cumulative score being the best accuracy up to l.",
        "Only the order of the tasks is compared (yes/no): the paper's numbers are for BERT-large's 24 layers.",
    ) + tuple(f"{task}: no layer gains over the embeddings, so its expected layer is undefined."
              for task, value in expected.items() if value is None)
    return StudyResult(study=STUDY.name, model=lm.ref, corpus=f"{train} / {evaluation}", protocol=PROTOCOL,
                       comparisons=(comparison,), measured=measured, notes=notes)


STUDY = Study(
    name="tenney",
    title="Tenney, Das & Pavlick (2019), BERT Rediscovers the Classical NLP Pipeline",
    model=PAPER_MODEL,
    data="OntoNotes 5.0 and the English Web Treebank, edge probing",
    stand_in="UD English EWT: a seeded sample of dev to train the label probes on, of test to score them on",
    default_corpus=DEFAULT_CORPUS,
    protocol=PROTOCOL,
    cost_cpu="about 2-3 min on MiniLM-L6 (500 + 250 sentences, 2 tasks, 7 layers; estimated from the bench); "
             "bert-large-uncased about 30 min (estimated)",
    cost_gpu="about 2 min on bert-large-uncased (estimated)",
    summary="Trains a label probe per layer for part of speech and for dependency relations and checks Tenney's "
            "order: part of speech has the lower expected layer.",
    run=run,
)
