"""Seeds as a dimension of a study: run it once per seed (the corpus sample and, for a training study, the
fine-tuning run are redone per seed), then give each number the paper reports every seed's value, the mean and a
95 % interval, and judge the interval, not one run, against the paper's tolerance band.

The interval is Student's t over the seeds, or a percentile bootstrap of the seeds' mean for a study that already
bootstraps its numbers (`Study.interval`). A head the paper names gets its rank in each seed and how often it is in
the top k. The model is loaded once for all seeds (core.model.loading.reusing_loads).
"""

from __future__ import annotations

# scipy imported in functions: listing the studies must stay light (tests/unit/test_studies.py).
import math
from dataclasses import dataclass, replace

import numpy as np

from core.model.loading import reusing_loads
from core.progress import StopCheck, check_stop
from core.references import Verdict
from core.studies import HeadRank, Study, StudyOptions, StudyResult

CONFIDENCE = 0.95
TOP_K = 5
BOOTSTRAP_RESAMPLES = 9999
# The bootstrap's own random stream: fixed, so the same seeds give the same interval.
BOOTSTRAP_SEED = 0
INTERVAL_VERDICTS = ("reproduced", "differs", "inconclusive")


def parse_seeds(text: str, name: str = "--seeds", single: str = "--seed") -> tuple[int, ...]:
    """'0,1,2' -> (0, 1, 2). A ValueError that says what is wrong: empty, not a whole number, negative, repeated,
    or a single seed (an interval needs two). name: what the user typed it into; single: where one seed goes."""
    parts = [p.strip() for p in str(text).split(",")]
    if not any(parts):
        raise ValueError(f"{name} is empty: give two or more seeds separated by commas, e.g. 0,1,2.")
    seeds = []
    for part in parts:
        if not part.lstrip("-").isdigit():
            raise ValueError(f"{name}: '{part}' is not a whole number; give seeds like 0,1,2.")
        seed = int(part)
        if seed < 0:
            raise ValueError(f"{name}: {seed} is negative; seeds are 0 or more.")
        if seed in seeds:
            raise ValueError(f"{name}: {seed} is given twice; each seed runs once.")
        seeds.append(seed)
    if len(seeds) < 2:
        raise ValueError(f"{name}: one seed ({seeds[0]}) gives no interval; give two or more, or for one run use {single}.")
    return tuple(seeds)


def interval(values, method: str = "t", confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The `confidence` interval of the mean of `values` (two or more): "t" is mean ± t(1 - α/2, n - 1)·s/√n;
    "bootstrap" the percentile interval of the mean over BOOTSTRAP_RESAMPLES resamples (scipy.stats.bootstrap).
    Equal values give (value, value)."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    if x.size < 2:
        raise ValueError(f"an interval needs two or more values, got {x.size}")
    if np.all(x == x[0]):  # x[0], not the mean: summing can move it off the value (0.4 x 3 / 3 = 0.4000000000000001)
        return float(x[0]), float(x[0])
    mean = float(x.mean())
    if method == "t":
        half = float(stats.t.ppf(0.5 + confidence / 2, x.size - 1)) * float(x.std(ddof=1)) / math.sqrt(x.size)
        return mean - half, mean + half
    if method == "bootstrap":
        found = stats.bootstrap((x,), np.mean, confidence_level=confidence, n_resamples=BOOTSTRAP_RESAMPLES,
                                method="percentile", rng=np.random.default_rng(BOOTSTRAP_SEED))
        return float(found.confidence_interval.low), float(found.confidence_interval.high)
    raise ValueError(f"unknown interval '{method}'; choose t or bootstrap")


def interval_verdict(low: float, high: float, paper: float, tolerance: float) -> str:
    """reproduced: the whole interval lies in the paper's band [paper - tolerance, paper + tolerance]; differs: it
    lies entirely outside; inconclusive: it straddles an edge of the band."""
    if paper - tolerance <= low and high <= paper + tolerance:
        return "reproduced"
    if high < paper - tolerance or low > paper + tolerance:
        return "differs"
    return "inconclusive"


@dataclass(frozen=True)
class NumberSummary:
    """One number the paper reports, over the seeds. values: [seeds] the measured value per seed (None where that
    seed did not measure it); mean, low, high: over the measured ones (None when fewer than two); verdict: the
    interval's (INTERVAL_VERDICTS), "different model: shape only" when the model or protocol is not the paper's
    (the numbers are not comparable), "not measured" when under two seeds measured it."""

    reference: str
    label: str
    measure: str
    key: int | str
    paper: float
    tolerance: float
    values: tuple[float | None, ...]
    mean: float | None
    low: float | None
    high: float | None
    verdict: Verdict | str

    def to_json(self) -> dict:
        return {"reference": self.reference, "label": self.label, "measure": self.measure, "key": self.key,
                "paper": self.paper, "tolerance": self.tolerance, "values": list(self.values), "mean": self.mean,
                "low": self.low, "high": self.high, "verdict": self.verdict}


@dataclass(frozen=True)
class HeadSummary:
    """A head the paper names, over the seeds: ranks [seeds] (1 = best; None where that seed could not rank it),
    of (heads ranked), in_top_k (seeds where rank <= top_k)."""

    claim: str
    head: str
    ranks: tuple[int | None, ...]
    of: int
    top_k: int
    in_top_k: int

    def to_json(self) -> dict:
        return {"claim": self.claim, "head": self.head, "ranks": list(self.ranks), "of": self.of,
                "top_k": self.top_k, "in_top_k": self.in_top_k}


@dataclass(frozen=True)
class SeedsSummary:
    """interval: "t" or "bootstrap"; confidence: 0.95; top_k: the heads' "top k"; numbers: one per number the paper
    reports; heads: one per head the paper names."""

    interval: str
    confidence: float
    top_k: int
    numbers: tuple[NumberSummary, ...]
    heads: tuple[HeadSummary, ...]

    @property
    def verdict(self) -> str:
        """The worst of the numbers' verdicts: differs < inconclusive < shape only < reproduced."""
        found = {n.verdict for n in self.numbers} - {"not measured"}
        if not found:
            return "not measured"
        for worst in ("differs", "inconclusive", "different model: shape only"):
            if worst in found:
                return worst
        return "reproduced"

    def to_json(self) -> dict:
        return {"interval": self.interval, "confidence": self.confidence, "top_k": self.top_k, "verdict": self.verdict,
                "numbers": [n.to_json() for n in self.numbers], "heads": [h.to_json() for h in self.heads]}


@dataclass(frozen=True)
class SeedsResult:
    """A study run once per seed: per_seed [seeds] the single-seed results, summary over them."""

    study: str
    seeds: tuple[int, ...]
    per_seed: tuple[StudyResult, ...]
    summary: SeedsSummary

    @property
    def model(self) -> str:
        return self.per_seed[0].model

    def to_json(self) -> dict:
        return {"study": self.study, "seeds": list(self.seeds), "per_seed": [r.to_json() for r in self.per_seed],
                "summary": self.summary.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> "SeedsResult":
        per_seed = tuple(StudyResult.from_json(r) for r in d["per_seed"])
        s = d["summary"]
        return cls(d["study"], tuple(d["seeds"]), per_seed, summarize(per_seed, s["interval"], s["confidence"], s["top_k"]))


def summarize(results, method: str = "t", confidence: float = CONFIDENCE, top_k: int = TOP_K) -> SeedsSummary:
    """Each paper number's values over `results` (one StudyResult per seed, in seed order), their mean, interval
    and verdict; each named head's ranks and how often it is in the top `top_k`."""
    numbers = []
    # Each seed's comparisons by reference key, then its rows by key: matched by name, not position.
    by_seed = [{c.reference.key: (c.kind, {row.key: row.measured for row in c.rows}) for c in r.comparisons}
               for r in results]
    for comparison in results[0].comparisons:
        ref = comparison.reference.key
        shape_only = any(seed[ref][0] == "shape" for seed in by_seed if ref in seed)
        for row in comparison.rows:
            values = tuple(seed[ref][1].get(row.key) if ref in seed else None for seed in by_seed)
            measured = [v for v in values if v is not None]
            mean = low = high = None
            verdict = "not measured"
            if len(measured) >= 2:
                mean = float(np.mean(measured)) if len(set(measured)) > 1 else measured[0]
                low, high = interval(measured, method, confidence)
                verdict = ("different model: shape only" if shape_only
                           else interval_verdict(low, high, row.paper, row.tolerance))
            numbers.append(NumberSummary(comparison.reference.key, comparison.reference.title, row.measure, row.key,
                                         row.paper, row.tolerance, values, mean, low, high, verdict))
    heads = []
    for named in dict.fromkeys((h.claim, h.head) for r in results for h in r.heads):
        found: list[HeadRank | None] = [next((h for h in r.heads if (h.claim, h.head) == named), None) for r in results]
        ranks = tuple(None if h is None else h.rank for h in found)
        heads.append(HeadSummary(named[0], named[1], ranks, max(h.of for h in found if h is not None), top_k,
                                 sum(1 for rank in ranks if rank is not None and rank <= top_k)))
    return SeedsSummary(method, confidence, top_k, tuple(numbers), tuple(heads))


def run_seeds(study: Study, options: StudyOptions, seeds, progress=None,
              should_stop: StopCheck = None, top_k: int = TOP_K) -> SeedsResult:
    """`study` run with `options` once per seed (options.seed replaced), as one piece of work: progress(done,
    total, message) goes over all seeds, its message "seed s (i of n)" (a core.jobs job's progress); the model is
    loaded once."""
    seeds = tuple(seeds)
    results = []
    with reusing_loads():
        for i, seed in enumerate(seeds):
            check_stop(should_stop)
            message = f"seed {seed} ({i + 1} of {len(seeds)})"

            def report(done: int, total: int, _message: str | None = None, i=i, message=message) -> None:
                if progress is not None and total:
                    progress(i * total + done, len(seeds) * total, message)

            results.append(study.run(replace(options, seed=seed), report, should_stop))
    return SeedsResult(study.name, seeds, tuple(results), summarize(results, study.interval, top_k=top_k))
