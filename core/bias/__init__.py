"""The biased-training-data experiment (full / biased / control runs) and counterfactual swaps.

    from core import bias
    bias.parse_words("woman, girl"); bias.match_mask(examples, words)      # words: matching, training sets
    bias.swap_text("She saw her.", bias.DEFAULT_SWAPS)                      # swaps: counterfactual copies
    bias.score_experiment(...); bias.ExperimentResult.from_json(d)         # statistics: scores, results
    bias.launch(spec); bias.experiment_status(name); bias.cancel_experiment(name)   # experiment (job runner)
    bias.accuracy_frame(result)                                            # tables for the page and exports
    bias.corpus_flips(corpus, run)                                         # flips: swaps on a corpus, no training

Modules: words, swaps, statistics, experiment, tables, flips. Charts of these live in core.charts.bias.
"""

from core.bias.experiment import (
    ACTIVE_STATES,
    ENDED_STATES,
    EXPERIMENT_NAME,
    JOB_KIND,
    QUICK_DEMO,
    TASKS,
    ExperimentData,
    ExperimentSpec,
    ExperimentStatus,
    attach,
    attach_job,
    cancel_experiment,
    data_file,
    derive_state,
    evaluate,
    experiment_data,
    experiment_dir,
    experiment_status,
    experiments_dir,
    flipped_examples,
    job_id,
    launch,
    list_experiments,
    load_result,
    load_spec,
    load_split,
    new_experiment_name,
    predict_labels,
    prepare,
    run_experiment,
    start_job,
    train_and_score,
)
from core.bias.flips import CorpusFlips, corpus_flips, item_examples
from core.bias.statistics import (
    ARMS,
    DIFFERENCES,
    SLICES,
    SLIDES_REFERENCE,
    ExperimentResult,
    RunResult,
    SliceScores,
    agreement_masks,
    bootstrap_accuracy_ci,
    paired_difference_ci,
    score_experiment,
    slice_scores,
)
from core.bias.swaps import (
    DEFAULT_SWAPS,
    FUNCTION_WORDS,
    Counterfactuals,
    counterfactuals,
    format_swaps,
    match_case,
    parse_swaps,
    swap_example,
    swap_targets,
    swap_text,
)
from core.bias.tables import (
    SLICE_ORDER,
    SLICE_TITLES,
    accuracy_frame,
    confusion_frame,
    difference_frame,
    f1_frame,
    slice_title,
    flip_frame,
    word_count_frame,
)
from core.bias.words import (
    DEFAULT_WORDS,
    FILTER_TITLES,
    FILTERS,
    TrainingSets,
    WordMatches,
    control_keep,
    check_filter,
    example_texts,
    highlight,
    match_mask,
    matcher,
    parse_words,
    training_sets,
    word_matches,
    word_pattern,
)

# The declarations of `bias` and `bias-heads` (core.contract), kept in a light module for the view registry: the
# registry of analyses finds them here.
from core.bias_settings import ANALYSES

__all__ = [name for name in dir() if not name.startswith("_") and name not in ("experiment", "flips", "statistics", "swaps", "tables", "words")]
