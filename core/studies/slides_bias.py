"""CS4650 slides, biased SNLI: the slides' filter (case-sensitive whole tokens of the premise) on the training
data and their recipe, with BERT Lens's size-matched random control beside it; the slides' numbers beside the
measured ones.

The filter's removed share is a property of the data alone: it is measured on the whole local SNLI train subset
and compared with the share the slides' loader lengths imply (17,168 -> 13,197 batches). The three runs go
through the bias experiment (core.bias, in this process), or a finished experiment is reused:
options.extra["run"] = its name. options.limit: training pairs before filtering; extra["test_limit"]: test pairs.
"""

from __future__ import annotations

# core.bias (torch, pandas) imported in functions: listing the studies must not load them.
import time
import uuid

from core import references
from core.data import datasets
from core.progress import ProgressCallback, StopCheck
from core.studies import Study, StudyOptions, StudyResult

DEFAULT_LIMIT = 600  # training pairs before filtering: three MiniLM runs of 2 epochs in a few minutes on a processor
DEFAULT_TEST_LIMIT = 1000


def removed_share(protocol: str = "slides") -> tuple[float, int]:
    """(share of the local SNLI train subset the filter removes, subset size): data only, no model."""
    from core.bias import DEFAULT_WORDS, match_mask

    train = datasets.snli("train")
    return float(match_mask(train, DEFAULT_WORDS, protocol).mean()), len(train)


def run(options: StudyOptions, progress: ProgressCallback = None, should_stop: StopCheck = None) -> StudyResult:
    from core.bias import ARMS, ExperimentSpec, load_result, load_spec, run_experiment

    if options.corpus not in (None, "snli"):
        raise ValueError(f"slides-bias trains on SNLI (the slides' data); corpus must be snli, got '{options.corpus}'")
    extra = dict(options.extra or {})
    if extra.get("run"):
        name = str(extra["run"])
        result = load_result(name)
        if result is None:
            raise ValueError(f"bias experiment '{name}' has no results yet (see python -m core bias --show {name})")
        model = load_spec(name).model
    else:
        model = options.model or STUDY.model
        spec = ExperimentSpec(
            name=f"slides-bias-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}", model=model,
            train_limit=options.limit or DEFAULT_LIMIT, test_limit=extra.get("test_limit", DEFAULT_TEST_LIMIT) or None,
            seed=options.seed, bootstrap=int(extra.get("bootstrap", 200)), protocol="slides",
        )
        stages = {arm: i for i, arm in enumerate(ARMS)} | {"evaluating": len(ARMS)}

        def report(stage: str, done: int, total: int) -> None:
            if progress is not None and total:
                progress(int(1000 * (stages[stage] + done / total)), 1000 * (len(ARMS) + 1))

        result = run_experiment(spec, report, should_stop)

    share, subset = removed_share("slides")
    bertlens_share, _ = removed_share("bertlens")
    full, biased, control = (result.runs[a] for a in ARMS)
    accuracy = {"full": full.overall.accuracy, "biased": biased.overall.accuracy}
    share_reference = references.get("slides-bias-removed-share")
    comparisons = (
        # Data only: the same filter on the same kind of data is comparable whatever model trains afterwards.
        references.compare(share_reference, {"removed share": share}, share_reference.model, "slides"),
        references.compare(references.get("slides-bias-accuracy"), accuracy, model, result.protocol),
    )
    measured = {
        "removed share of training pairs": {"local SNLI train subset, slides' filter": share,
                                            "local SNLI train subset, BERT Lens's filter": bertlens_share,
                                            "this run's training pairs": result.removed / max(full.train_size, 1)},
        "test accuracy": {arm: result.runs[arm].overall.accuracy for arm in ARMS},
        "accuracy change vs full (points)": {"biased": 100 * (biased.overall.accuracy - full.overall.accuracy),
                                             "control": 100 * (control.overall.accuracy - full.overall.accuracy)},
        "test accuracy, pairs with the words": {arm: result.runs[arm].slices["with_words"].accuracy for arm in ARMS},
        "train pairs": {arm: result.runs[arm].train_size for arm in ARMS},
    }
    notes = [
        f"Experiment {result.name}, protocol {result.protocol}: {full.train_size} training pairs, {result.removed} "
        f"removed by the filter; {result.test_size} test pairs ({result.test_with_words} with a word in the premise).",
        f"The filter removes {share:.2%} of the local {subset:,}-pair SNLI train subset; the slides' loader "
        f"lengths imply {share_reference.values['removed share']:.2%} of full SNLI train. BERT Lens's own filter "
        f"(any case, premise or hypothesis) would remove {bertlens_share:.2%}.",
        f"The slides trained BERT-base on all of SNLI (2 epochs); this run used {full.train_size} pairs on {model}: "
        "a small-budget run on another model is indicative only.",
        "The control (as many pairs removed at random) is BERT Lens's addition: a drop the control shows too comes "
        "from having less data, not from the words. The slides' 31-point drop had no control.",
    ]
    if result.protocol != "slides":
        notes.append(f"The reused experiment follows protocol '{result.protocol}', not the slides'.")
    degenerate = {result.runs[arm].run: result.runs[arm].degeneracy(result.labels).to_json() for arm in ARMS}
    return StudyResult(STUDY.name, model, "snli", result.protocol, comparisons, measured, tuple(notes), degenerate)


STUDY = Study(
    name="slides-bias",
    title="CS4650 slides (Ge & Zhu): SNLI with the 'female' words removed from training",
    model="bert-base-uncased",
    data="SNLI 1.0 train (549,367 pairs) filtered by 7 words; full test split (9,824 pairs)",
    stand_in="the local 19,999-pair random subset of SNLI train (test split complete)",
    default_corpus="snli",
    protocol="slides",
    cost_cpu=f"default ({DEFAULT_LIMIT} train pairs, {DEFAULT_TEST_LIMIT} test pairs, 3 runs x 2 epochs + scoring): "
             "measured 370 s on MiniLM-L6 with 2 shared CPU cores; the slides' full size (549,367 pairs, 3 runs, "
             "9,824 test pairs) on bert-base estimated ~400 h",
    cost_gpu="default size: estimated about a minute (not measured: no GPU here); full size on bert-base: the "
             "slides report 6,140 s for the full run on an unstated GPU; estimated 1.5-3 h for the three runs on one H100",
    summary="The slides' filter (forbidden words as whole, case-sensitive tokens of the premise) and recipe; full, "
            "biased and size-matched control runs on the test split; removed share and accuracies beside the "
            "slides' 23.1 % and 90.45 % -> 59.47 %.",
    run=run,
    interval="bootstrap",  # its accuracies already come with bootstrap intervals: a seeds run keeps to that
)
