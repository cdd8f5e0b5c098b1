"""The training engine: fine-tuning BERT-family encoders as classifiers, SimCSE contrastive training, and
training jobs that run one at a time in their own processes.

    from core.training import Recipe, finetune, submit, list_runs, load_classifier

    recipe = Recipe(model="all-MiniLM-L6-v2", task="snli", run_name="minilm-snli", train_limit=2000, epochs=1)
    metrics = finetune(recipe)            # in this process; writes runs_dir()/minilm-snli (see runs.py)
    submit(recipe.replace(run_name="b"))  # or as a background job (`python -m core finetune --recipe ...`)
    list_runs()                           # [RunInfo(name, state, recipe, status, metrics, log_tail), ...]
    clf = load_classifier("minilm-snli")  # clf.predict_proba([(premise, hypothesis)]) -> [n, classes]
    load_model("minilm-snli")             # the fine-tuned encoder alone, like any model

Modules: tasks (data), recipe (Recipe), engine (training loops), runs (run folders and status, a run's
evaluation sample), jobs (processes and the queue), report (tables of runs for the page; their charts are in
core.charts.finetune). The checkpoint format and predictions (core.model.classifier) and accuracy / F1 / confusion
(core.model.evaluation) live below, in core.model, where the analyses read them too; classifier.py and
evaluation.py here re-export them.
"""

from core.model.classifier import Classifier, LoadedClassifier, is_classifier_folder, load_classifier
from core.model.evaluation import EvalMetrics, evaluate_predictions
from core.training.engine import drop_last_layers, finetune, freeze, simcse_loss, torch_threads
from core.training.jobs import cancel, submit, wait
from core.training.queue import queue_position, queue_turn
from core.training.recipe import HEADS, OBJECTIVES, Recipe
from core.training.runs import RunExists, RunInfo, delete_run, get_run, list_runs
from core.training.tasks import BUILTIN_TASKS, TASK_LABELS, TASK_TITLES, TaskData, TaskError, load_contrastive, load_task

__all__ = [
    "BUILTIN_TASKS", "Classifier", "EvalMetrics", "HEADS", "LoadedClassifier", "OBJECTIVES", "Recipe", "RunExists",
    "RunInfo", "TASK_LABELS", "TASK_TITLES", "TaskData", "TaskError", "cancel", "delete_run", "drop_last_layers",
    "evaluate_predictions", "finetune", "freeze", "get_run", "is_classifier_folder", "list_runs", "load_classifier",
    "load_contrastive", "load_task", "queue_position", "queue_turn", "simcse_loss", "submit", "torch_threads", "wait",
]
