"""Clark et al. (2019) statistics and Kovaleva et al. (2019) pattern types of every head over a dataset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core.analyses.attention import head_entropy
from core.analyses.heads.roles import PROTOCOL_HELP, PROTOCOLS, TokenRoles, check_attention, roles_of
from core.contract import setting
from core.model import distributed
from core.model.encoding import Encoding, TextInput, encode_share
from core.model.loading import LoadedModel
from core.progress import ProgressCallback, StopCheck
from core.protocols import DEFAULT, check


CLARK_SMOOTHING = 1e-4  # Clark et al.'s entropy is of 0.9999·a + 0.0001/T
STAT_NAMES = ("cls", "sep", "punct", "self", "prev", "next", "entropy")
STAT_TITLES = {
    "cls": "attention to [CLS]",
    "sep": "attention to [SEP]",
    "punct": "attention to punctuation",
    "self": "attention to the token itself",
    "prev": "attention to the previous token",
    "next": "attention to the next token",
    "entropy": "entropy (nats)",
}
PATTERNS = ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")

# Pattern rules (Kovaleva et al. sorted maps by eye and then with a CNN; these are explicit thresholds on the
# same visual cues). Measured over the rows of real tokens (special-token rows left out, as they look alike in
# every type), averaged over those rows:
#   V = mass on special-token keys ([CLS], [SEP]): the vertical stripes;
#   D = mass on non-special keys at offsets -1, 0, +1: the diagonal band;
#   B = mass on non-special keys of the query's own sentence (pairs only): the two blocks.
# Rules, first match wins:
#   vertical+diagonal  V >= MIXED_EACH and D >= MIXED_EACH and V + D >= MIXED_TOTAL
#   vertical           V >= VERTICAL
#   diagonal           D >= DIAGONAL
#   block              pair and B >= BLOCK
#   heterogeneous      otherwise
VERTICAL = 0.5
DIAGONAL = 0.5
MIXED_EACH = 0.25
MIXED_TOTAL = 0.75
BLOCK = 0.75


def example_stats(attentions: np.ndarray, roles: TokenRoles, protocol: str = DEFAULT) -> np.ndarray:
    """Clark et al.'s per-head statistics for one input: float64 [len(STAT_NAMES), layer, head].

    Each is the mass a head puts on those keys, averaged over *all* query positions (special tokens included):
    cls, sep (all [SEP]s summed), punct (as `roles` defines it); self (key = query), prev (key = query - 1),
    next (key = query + 1), where the first query has no previous and the last no next token (they count 0);
    entropy is the mean entropy of the rows, in nats (under "clark" of his smoothed 0.9999·a + 0.0001/T).
    """
    check(protocol, PROTOCOLS)
    a = check_attention(attentions, len(roles.cls))
    t = a.shape[-1]

    def mass_to(mask: np.ndarray) -> np.ndarray:
        return a[..., mask].sum(axis=-1).mean(axis=-1)

    def diagonal(offset: int) -> np.ndarray:
        return np.diagonal(a, offset=offset, axis1=2, axis2=3).sum(axis=-1) / t

    entropy = head_entropy(a, smoothing=CLARK_SMOOTHING if protocol == "clark" else 0.0)
    return np.stack([mass_to(roles.cls), mass_to(roles.sep), mass_to(roles.punct), diagonal(0), diagonal(-1), diagonal(1), entropy])


def pattern_features(attentions: np.ndarray, roles: TokenRoles) -> np.ndarray:
    """The cues the pattern rules read, for one input: float64 [3, layer, head] = (V, D, B), see PATTERNS' rules.

    Rows of special tokens are left out; an input with no real token gives zeros (heterogeneous).
    """
    a = check_attention(attentions, len(roles.cls))
    special = roles.special
    rows = np.flatnonzero(~special)
    if rows.size == 0:
        return np.zeros((3,) + a.shape[:2])
    a = a[:, :, rows, :]  # [L, H, R, T]
    t = len(special)
    offset = np.arange(t)[None, :] - rows[:, None]  # [R, T]
    band = (np.abs(offset) <= 1) & ~special[None, :]
    same = (roles.segment_ids[None, :] == roles.segment_ids[rows][:, None]) & ~special[None, :]
    vertical = a[..., special].sum(axis=-1).mean(axis=-1)
    diagonal = (a * band).sum(axis=-1).mean(axis=-1)
    block = (a * same).sum(axis=-1).mean(axis=-1) if roles.is_pair else np.zeros(a.shape[:2])
    return np.stack([vertical, diagonal, block])


def classify_patterns(features: np.ndarray, is_pair: bool) -> np.ndarray:
    """Pattern index into PATTERNS for every head: features [3, layer, head] (V, D, B) -> int [layer, head]."""
    v, d, b = features
    kinds = np.full(v.shape, PATTERNS.index("heterogeneous"), dtype=np.int64)
    # Assign from the last rule to the first so the first matching rule wins.
    if is_pair:
        kinds[b >= BLOCK] = PATTERNS.index("block")
    kinds[d >= DIAGONAL] = PATTERNS.index("diagonal")
    kinds[v >= VERTICAL] = PATTERNS.index("vertical")
    kinds[(v >= MIXED_EACH) & (d >= MIXED_EACH) & (v + d >= MIXED_TOTAL)] = PATTERNS.index("vertical+diagonal")
    return kinds


def example_patterns(attentions: np.ndarray, roles: TokenRoles) -> np.ndarray:
    """int [layer, head]: each head's pattern type on this input (index into PATTERNS)."""
    return classify_patterns(pattern_features(attentions, roles), roles.is_pair)


@dataclass(frozen=True)
class PatternExample:
    """One head's map on one input, kept to show what a pattern type looks like. attention [T, T]."""

    pattern: str
    example: int
    layer: int
    head: int
    tokens: tuple[str, ...]
    attention: np.ndarray


@dataclass(frozen=True)
class HeadSurvey:
    """Statistics and pattern types of every head over a sample of inputs.

    stats           float64 [len(STAT_NAMES), layer, head]: per-input statistics (see example_stats) averaged
                    over inputs; `stat(name)` gives one [layer, head] array
    pattern_counts  int [layer, head, len(PATTERNS)]: on how many inputs each head showed each type
    examples        a few maps per type (at most `keep_examples` each, from different heads when possible)
    n_examples      inputs seen; n_pairs of them were sentence pairs; n_truncated were cut to the max length
    corpus          the corpus spec the inputs came from, when known ("" otherwise)
    protocol        "bertlens" or "clark" (what punct and entropy mean, see core.analyses.heads)
    """

    model: str
    stats: np.ndarray
    pattern_counts: np.ndarray
    examples: tuple[PatternExample, ...]
    n_examples: int
    n_pairs: int
    n_truncated: int
    corpus: str = ""
    protocol: str = DEFAULT
    world_size: int = 1  # processes that shared the pass (core.model.distributed)

    def layer_means(self, name: str) -> np.ndarray:
        """float64 [layer]: a statistic averaged over the heads of each layer (the lines of Clark's Figure 2)."""
        return self.stat(name).mean(axis=1)

    def stat(self, name: str) -> np.ndarray:
        if name not in STAT_NAMES:
            raise KeyError(f"unknown statistic {name!r}; choose one of {', '.join(STAT_NAMES)}")
        return self.stats[STAT_NAMES.index(name)]

    @property
    def dominant_pattern(self) -> np.ndarray:
        """int [layer, head]: each head's most frequent type (index into PATTERNS; ties go to the earlier type)."""
        return self.pattern_counts.argmax(axis=-1)

    @property
    def pattern_share(self) -> dict[str, float]:
        """Share of each type over all (input, head) maps."""
        totals = self.pattern_counts.sum(axis=(0, 1)).astype(np.float64)
        whole = totals.sum()
        return {p: float(totals[i] / whole) if whole else 0.0 for i, p in enumerate(PATTERNS)}

    def to_json(self) -> dict:
        out = {name: self.stat(name).round(6).tolist() for name in STAT_NAMES}
        out["pattern_share"] = self.pattern_share
        out["dominant_pattern"] = [[PATTERNS[k] for k in row] for row in self.dominant_pattern]
        out.update(model=self.model, n_examples=self.n_examples, n_pairs=self.n_pairs, n_truncated=self.n_truncated,
                   corpus=self.corpus, protocol=self.protocol, world_size=self.world_size)
        return out


@dataclass(frozen=True)
class SurveySettings:
    """The `heads` analysis's settings, declared once (core.contract): CLI options, lens.heads keywords, widgets."""

    protocol: str = setting(DEFAULT, PROTOCOL_HELP, choices=PROTOCOLS, url=None)  # the page's link: a bool switch
    batch_size: int = setting(16, "inputs encoded at once", low=1, high=4096, url=None)


def run_survey(lm: LoadedModel, inputs: Sequence[TextInput], settings: SurveySettings = SurveySettings(),
               progress: ProgressCallback = None, should_stop: StopCheck = None) -> HeadSurvey:
    """`survey_heads` with its declared settings (the `heads` analysis's run)."""
    return survey_heads(lm, inputs, batch_size=settings.batch_size, protocol=settings.protocol, progress=progress,
                        should_stop=should_stop)


def survey_heads(
    lm: LoadedModel,
    inputs: Sequence[TextInput],
    *,
    batch_size: int = 16,
    keep_examples: int = 3,
    max_length: int | None = None,
    protocol: str = DEFAULT,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> HeadSurvey:
    """Clark statistics and Kovaleva types of every head over `inputs` (strings or (A, B) pairs), one pass."""
    check(protocol, PROTOCOLS)
    if not inputs:
        raise ValueError("no inputs: give at least one sentence or sentence pair")
    total_stats = None
    counts = None
    kept: dict[str, list[PatternExample]] = {p: [] for p in PATTERNS}
    n_pairs = n_truncated = 0
    for index, enc in encode_share(
        lm, list(inputs), batch_size=batch_size, hidden_states=False, max_length=max_length,
        progress=progress, should_stop=should_stop,
    ):
        roles = roles_of(enc, protocol)
        stats = example_stats(enc.attentions, roles, protocol)
        kinds = example_patterns(enc.attentions, roles)
        if total_stats is None:
            total_stats = np.zeros_like(stats)
            counts = np.zeros(kinds.shape + (len(PATTERNS),), dtype=np.int64)
        total_stats += stats
        np.add.at(counts, (*np.indices(kinds.shape), kinds), 1)
        n_pairs += enc.is_pair
        n_truncated += enc.truncated
        _keep_examples(kept, kinds, enc, index, keep_examples)
    total_stats, counts, n_pairs, n_truncated, kept = _reduce_survey(total_stats, counts, n_pairs, n_truncated, kept, keep_examples)
    n = len(inputs)
    examples = tuple(e for p in PATTERNS for e in kept[p])
    return HeadSurvey(lm.ref, total_stats / n, counts, examples, n, n_pairs, n_truncated, protocol=protocol,
                      world_size=distributed.current().world_size)


def _reduce_survey(total_stats, counts, n_pairs, n_truncated, kept, limit: int):
    """Several ranks (core.model.distributed): sums and counts added up; each pattern keeps the examples of the lowest
    ranks up to `limit` (the statistics equal one process's; the shown examples may be other inputs)."""
    ctx = distributed.current()
    if not ctx.distributed:
        return total_stats, counts, n_pairs, n_truncated, kept
    parts = ctx.gather_objects((total_stats, counts, int(n_pairs), int(n_truncated), kept))
    present = [p for p in parts if p[0] is not None]
    merged = {pattern: [e for p in parts for e in p[4][pattern]][:limit] for pattern in kept}
    return (sum(p[0] for p in present), sum(p[1] for p in present), sum(p[2] for p in parts), sum(p[3] for p in parts),
            merged)


def _keep_examples(kept: dict[str, list[PatternExample]], kinds: np.ndarray, enc: Encoding, index: int, limit: int) -> None:
    for k, pattern in enumerate(PATTERNS):
        bucket = kept[pattern]
        if len(bucket) >= limit:
            continue
        used = {(e.layer, e.head) for e in bucket}
        for layer, head in zip(*np.nonzero(kinds == k)):
            if (int(layer), int(head)) not in used:
                bucket.append(PatternExample(pattern, index, int(layer), int(head), enc.tokens, enc.attentions[layer, head].copy()))
                break
