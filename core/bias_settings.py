"""The bias experiment's declarations (core.contract): `bias` and `bias-heads`, their settings written once.

Light on purpose (core.contract only): the Bias experiment's view (core/views/bias.py) makes its URL parameters from
these declarations, and the view registry must load without torch, which the `core.bias` package imports at once.
`core.bias` re-exports `ANALYSES`, so the registry of analyses finds them there, and the constants below are the
ones core.bias uses (words.DEFAULT_WORDS, experiment.TASKS, heads.DEFAULT_TOP_K / DEFAULT_PAIRS)."""

from __future__ import annotations

from dataclasses import dataclass

from core.contract import Analysis, setting

DEFAULT_WORDS = ("women", "woman", "girl", "girls", "mother", "wife", "female")
TASKS = ("snli", "mrpc")
FILTERS = ("bertlens", "slides")
HEADS = ("linear", "mlp")
DEFAULT_TOP_K = 3
DEFAULT_PAIRS = 100  # flipping pairs patched at most (one [layer, head] grid each)
MAX_LIMIT = 10_000_000


@dataclass(frozen=True)
class BiasSettings:
    """What `bias` (the CLI), `core.lens.bias` and the Bias experiment page let a person choose. The page's link
    carries the protocol as its own switch (`protocol=true`: slides), so the declaration gives it no URL name."""

    task: str = setting("snli", "the task: its train split is filtered, its test split scored", choices=TASKS)
    words: str = setting(",".join(DEFAULT_WORDS), "comma-separated words (default: the slides')")
    train_limit: int | None = setting(None, "seeded subset of the training split, before filtering (0 or none: all)",
                                      type="int", low=0, high=MAX_LIMIT)
    eval_limit: int | None = setting(None, "seeded subset of the test split, scored (0 or none: all)", type="int",
                                     low=0, high=MAX_LIMIT, url="test_limit")
    epochs: int = setting(2, "training epochs of each run", low=1, high=100)
    seed: int = setting(0, "the subsets, the control's removals, training and the bootstrap", low=0, high=2**31 - 1)
    lr: float = setting(5e-5, "learning rate", low=1e-10, high=1.0)
    batch_size: int = setting(32, "training batch size", low=1, high=4096)
    max_length: int = setting(128, "word pieces per input at most", low=1, high=8192)
    head: str = setting("linear", "the classifier head: linear, or mlp (→50→classes)", choices=HEADS)
    freeze_lowest: int = setting(0, "freeze layers 1..N: the lowest N transformer layers, numbered as on every chart",
                                 low=0, high=128)
    freeze_embeddings: bool = setting(False, "keep the embeddings fixed in all three runs")
    bootstrap: int = setting(1000, "bootstrap resamples for the intervals", low=1, high=1_000_000)
    protocol: str = setting("bertlens", "slides: the CS4650 slides' filter (case-sensitive whole space-separated "
                            "tokens of the premise only: 23.1 percent of SNLI train removed) and recipe (AdamW 5e-5, eps 1e-8, "
                            "no weight decay, 2 epochs, batch 32); bertlens: whole words in any case in premise or "
                            "hypothesis (28.6 percent), BERT Lens's recipe", choices=FILTERS, url=None)

    @property
    def limits(self) -> tuple[int | None, int | None]:
        """(train, test) subset sizes as the experiment takes them: 0 read as None (all)."""
        return self.train_limit or None, self.eval_limit or None


@dataclass(frozen=True)
class BiasHeadsSettings:
    """What `bias-heads`, `core.lens.bias_heads` and the bias page's "Which heads carry the flips?" offer."""

    top_k: int = setting(DEFAULT_TOP_K, "heads disabled to confirm the ranking", low=1, high=1000)
    limit: int = setting(DEFAULT_PAIRS, "flipping pairs patched at most", low=1, high=100_000)
    mode: str = setting("mask", "how the top-k heads are disabled: mask zeroes their output; uniform: Kovaleva's",
                        choices=("mask", "uniform"))


ANALYSES = (
    Analysis(name="bias", view="bias", command="bias", lens="bias", settings=BiasSettings,
             run="core.bias.experiment:run_settings", charts="core.charts.bias:experiment_charts",
             title="Bias experiment", order=0,
             summary="train full / biased (word matches removed) / control (as many removed at random) and compare"),
    Analysis(name="bias-heads", view="bias", command="bias-heads", lens="bias_heads", settings=BiasHeadsSettings,
             run="core.bias.heads:run_bias_heads", title="Which heads carry the flips?", order=1,
             summary="the heads behind a run's bias flips: patched head by head, top-k confirmed by ablation"),
)
BIAS, BIAS_HEADS = ANALYSES
