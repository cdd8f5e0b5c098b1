"""Reproducible studies: one module per published analysis, each running the paper's protocol and putting the
paper's numbers (from `core.references`) beside the measured ones.

A study module defines `STUDY = Study(...)`. Its `run(options, progress, should_stop)` is plain core work, so
the CLI (`python -m core reproduce NAME`) and the Reproduce page run it the same way, as a `core.jobs` job
with progress and cancel. Importing this package loads no model and no torch: `--list` stays instant.
"""

from __future__ import annotations

# core.training (torch) imported in functions: listing the studies must not load torch (tests/unit/test_studies.py).
import importlib
from dataclasses import dataclass, field
from typing import Callable, Mapping

from core.progress import ProgressCallback, StopCheck
from core.references import Comparison, Verdict, json_keyed

# The order of the Reproduce page and of `reproduce --list`.
NAMES = (
    "ethayarajh", "clark", "kovaleva", "hewitt-manning", "merchant", "visbert",
    "slides-layer12", "slides-contrastive", "slides-bias", "bertviz-mrpc", "sun-aspect", "tenney",
)


@dataclass(frozen=True)
class StudyOptions:
    """What a user may change: model (None: the paper's), corpus spec (None: the study's stand-in), seed, limit
    (at most this many items; None: the study's default size) and study-specific extras (JSON values)."""

    model: str | None = None
    corpus: str | None = None
    seed: int = 0
    limit: int | None = None
    extra: Mapping[str, object] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"model": self.model, "corpus": self.corpus, "seed": self.seed, "limit": self.limit, "extra": dict(self.extra)}


@dataclass(frozen=True)
class HeadRank:
    """A named head's standing in one run: claim (what the paper says the head does), head (its name as the paper
    writes it), rank among all `of` heads on the claim's score (1 = best)."""

    claim: str
    head: str
    rank: int
    of: int

    def to_json(self) -> dict:
        return {"claim": self.claim, "head": self.head, "rank": self.rank, "of": self.of}


@dataclass(frozen=True)
class StudyResult:
    """What a study measured, beside the paper.

    comparisons: one per reference the study checks (paper vs measured rows, per layer where the paper reports
    per layer); measured: every measured series by name (layer -> value, or row -> value), including ones the
    paper has no number for; notes: plain sentences on what differs from the paper (stand-in data, sizes);
    degenerate: for each classification run the study trained or read, core.training.evaluation's
    Degeneracy.to_json() (whether it learned (almost) nothing, so comparisons with it are not meaningful);
    heads: the rank of each head the paper names (its claims about single heads), for a seeds run to follow.
    """

    study: str
    model: str
    corpus: str
    protocol: str
    comparisons: tuple[Comparison, ...]
    measured: Mapping[str, Mapping[int | str, float]]
    notes: tuple[str, ...]
    degenerate: Mapping[str, dict] = field(default_factory=dict)
    heads: tuple[HeadRank, ...] = ()

    @property
    def verdict(self) -> Verdict:
        """The study's overall verdict: the worst of its comparisons (differs < shape only < reproduced)."""
        verdicts = [c.verdict for c in self.comparisons if c.verdict != "not measured"]
        if not verdicts:
            return "not measured"
        for worst in ("differs", "different model: shape only"):
            if worst in verdicts:
                return worst  # type: ignore[return-value]
        return "reproduced"

    def to_json(self) -> dict:
        return {
            "study": self.study, "model": self.model, "corpus": self.corpus, "protocol": self.protocol,
            "verdict": self.verdict, "comparisons": [c.to_json() for c in self.comparisons],
            "measured": {name: {str(k): float(v) for k, v in series.items()} for name, series in self.measured.items()},
            "notes": list(self.notes), "degenerate": dict(self.degenerate), "heads": [h.to_json() for h in self.heads],
        }

    @classmethod
    def from_json(cls, d: dict) -> "StudyResult":
        """The result to_json wrote (a finished study's result.json, read back after the server restarted); fields
        that JSON keeps as they are pass through by name."""
        plain = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**{**plain, "comparisons": tuple(Comparison.from_json(c) for c in d["comparisons"]),
                      "measured": {name: json_keyed(series) for name, series in d["measured"].items()},
                      "notes": tuple(d["notes"]), "heads": tuple(HeadRank(**h) for h in d.get("heads", ()))})


@dataclass(frozen=True)
class Study:
    """name: the CLI name; title: the paper; model / data: what the paper used; stand_in: the offline data used
    instead (None when the paper's own data is what runs); default_corpus: the corpus spec run by default;
    protocol: the `core.protocols` name; cost_cpu / cost_gpu: expected wall time at the default size, in words;
    run(options, progress, should_stop) -> StudyResult; interval: how a run over several seeds (core.studies.seeds)
    puts an interval on each number: "t" (Student-t over the seeds) or "bootstrap" (for a study that already
    bootstraps its numbers)."""

    name: str
    title: str
    model: str
    data: str
    stand_in: str | None
    default_corpus: str | None
    protocol: str
    cost_cpu: str
    cost_gpu: str
    summary: str
    run: Callable[[StudyOptions, ProgressCallback | None, StopCheck | None], StudyResult]
    interval: str = "t"

    def to_json(self) -> dict:
        return {
            "name": self.name, "title": self.title, "model": self.model, "data": self.data, "stand_in": self.stand_in,
            "default_corpus": self.default_corpus, "protocol": self.protocol, "cost_cpu": self.cost_cpu,
            "cost_gpu": self.cost_gpu, "summary": self.summary, "interval": self.interval,
        }


def half_progress(progress: ProgressCallback | None, offset: int) -> ProgressCallback | None:
    """The progress of one of a study's two passes of equal size (offset 0: the first, 1: the second)."""
    if progress is None:
        return None
    return lambda done, total: progress(offset * total + done, 2 * total)


def degeneracy_of(*runs: str) -> dict[str, dict]:
    """Degeneracy.to_json() of each of `runs` that is a finished classification run (core.training.runs), for
    StudyResult.degenerate; other models are left out. Imported lazily: this package imports no torch."""
    from core.training.runs import saved_degeneracy

    found = {run: saved_degeneracy(run) for run in runs}
    return {run: d.to_json() for run, d in found.items() if d is not None}


def get(name: str) -> Study:
    """The study called `name`; a ValueError naming the known ones otherwise."""
    if name not in NAMES:
        raise ValueError(f"Unknown study '{name}'; choose one of: {', '.join(NAMES)}.")
    return importlib.import_module(f"core.studies.{name.replace('-', '_')}").STUDY


def all_studies() -> list[Study]:
    return [get(name) for name in NAMES]
