"""Bias experiment: train without the pairs that mention chosen words, beside a random control."""

from core.bias_settings import BIAS
from core.views import Param, View, analysis_params, flag

# The page's training subset on a CPU (app_pages/bias.py; 0 = all on a GPU): a lesson step's word counts use it.
CPU_TRAIN_LIMIT = 2000


def charts(lens, model, a, b, params) -> list:
    """A lesson step's chart: how many training pairs mention each word, the page's first chart (the runs' results
    need an experiment trained before class)."""
    protocol = "slides" if flag(params, "protocol") else "bertlens"
    limit = int(params["train_limit"]) if params.get("train_limit") not in (None, "") else CPU_TRAIN_LIMIT
    chart = lens.bias_words(params.get("words") or None, task=params.get("task") or "snli", train_limit=limit,
                            seed=int(params.get("seed") or 0), protocol=protocol)
    return [(chart, "Training pairs that mention each word: a biased run trains without them.")]

VIEW = View(
    name="bias",
    title="Bias experiment",
    url_path="bias",
    icon=":material/balance:",
    page="app_pages/bias.py",
    order=70,
    summary="Remove every training pair that mentions women (or any words you choose) and train again, beside a "
            "control that drops as many random pairs. See where accuracy suffers and how often swapping \"woman\" "
            "for \"man\" changes the answer.",
    params=(
        Param("protocol", "bias.paper_protocol", "bool"),
        # words, task, train_limit, test_limit, seed: made from BiasSettings (core.bias_settings, light: this
        # registry loads without torch); the page's widgets stay its own (its CPU defaults differ from the CLI's).
        *analysis_params(BIAS, "bias.", only=("words", "task", "train_limit", "eval_limit", "seed"),
                         keys={"eval_limit": "bias.test_limit"}),
        Param("experiment", "bias.experiment", "str"),
        Param("slice", "bias.confusion_slice", "str"),
        Param("flip_arm", "bias.flip_arm", "str"),
    ),
    charts=charts,
)
