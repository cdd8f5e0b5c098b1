"""Sentence-pair attention (the bertviz MRPC report, reference 004), two ways.

1. As bertviz shows it (`pair_attention`): sentence A's word pieces as queries, B's slice as keys, per group of
   pairs: the mass on B, on the final [SEP], and on the same word piece in B (its "twin").

2. By gold label (`pair_heads`): for each head, the share of sentence A's attention that goes to sentence B (A→B)
   and of B's that goes to A (B→A), per pair, split by the pair's gold label; the heads whose shares separate the
   two labels most.

In (2) the slices are bertviz's (head_view.py: slice_a = [0, sentence_b_start), slice_b = [sentence_b_start, end)), so
A→B counts the final [SEP] as part of B and B→A counts [CLS] and the middle [SEP] as part of A. With
`words_only=True` the keys are the other sentence's word pieces alone (no special tokens), which takes the large
[SEP]/[CLS] sinks out of the share. Queries are always the sentence's own word pieces ([CLS]/[SEP] rows left out);
nothing is renormalised: a share is the mass a row puts on the other sentence, averaged over the sentence's rows.

Separation per head is the area under the ROC curve of the per-pair share for telling the first label (MRPC's
"equivalent") from the second: 0.5 = no separation, 1 = every paraphrase pair above every other, 0 = the reverse.

scipy is imported in functions: the studies list and `python -m core --help` import this module without it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from core import numbering
from core.analyses.heads.roles import check_attention
from core.contract import Analysis, setting
from core.data import corpus as corpora
from core.model.encoding import encode_stream
from core.model.loading import LoadedModel
from core.progress import ProgressCallback, StopCheck
from core.protocols import DEFAULT

PAIR_LABELS = ("equivalent", "not equivalent")


def labelled_pairs(corpus: corpora.Corpus) -> tuple[list[tuple[str, str]], list[str]]:
    """The corpus's pairs and their label: "equivalent" for its positive pairs (MRPC paraphrases, SNLI
    entailments), "not equivalent" for the rest. Single sentences are left out."""
    positive = {(corpus.sentences[i], corpus.sentences[j]) for i, j in corpus.pairs}
    pairs, labels = [], []
    for item in corpus.items:
        if isinstance(item, str):
            continue
        a, b = item
        pairs.append((a, b))
        labels.append(PAIR_LABELS[0] if (" ".join(a.split()), " ".join(b.split())) in positive else PAIR_LABELS[1])
    return pairs, labels


# ---- as bertviz shows it --------------------------------------------------------------------------------


PAIR_MEASURES = ("to_b", "to_sep", "to_twin")
def pair_example(attentions: np.ndarray, tokens: Sequence[str], special_mask: np.ndarray,
                 segment_ids: np.ndarray) -> tuple[np.ndarray, int, int]:
    """One pair, as bertviz's "Sentence A -> Sentence B" filter slices it (A = positions before the first
    segment-1 token, B = the rest: B's pieces and the final [SEP]; raw weights, nothing renormalised).

    Returns (float64 [3, layer, head] = PAIR_MEASURES, each averaged over A's word pieces ([CLS]/[SEP] rows left
    out); how many of A's word pieces have a twin in B (the same piece string); how many word pieces A has)."""
    a = check_attention(attentions, len(tokens))
    special = np.asarray(special_mask, dtype=bool)
    segments = np.asarray(segment_ids)
    b_start = int(np.argmax(segments == 1)) if (segments == 1).any() else len(tokens)
    if b_start >= len(tokens):
        raise ValueError("not a sentence pair: no token of sentence B")
    queries = [q for q in range(b_start) if not special[q]]
    if not queries:
        return np.zeros((3,) + a.shape[:2]), 0, 0
    b_keys = np.arange(b_start, len(tokens))
    sep = [k for k in b_keys if special[k]]
    rows = a[:, :, queries, :]  # [L, H, Q, T]
    to_b = rows[..., b_keys].sum(axis=-1).mean(axis=-1)
    to_sep = rows[..., sep].sum(axis=-1).mean(axis=-1)
    twin = np.zeros((len(queries), len(tokens)))
    for i, q in enumerate(queries):
        for k in b_keys:
            twin[i, k] = not special[k] and tokens[k] == tokens[q]
    to_twin = (rows * twin).sum(axis=-1).mean(axis=-1)
    return np.stack([to_b, to_sep, to_twin]), int((twin.sum(axis=1) > 0).sum()), len(queries)


@dataclass(frozen=True)
class PairAttention:
    """Sentence A → sentence B attention over groups of pairs (e.g. MRPC's equivalent / not equivalent pairs).

    groups      [G] group names, in the order given
    measures    float64 [G, 3, layer, head]: PAIR_MEASURES per head, averaged over A's word pieces of each pair,
                then over the group's pairs (see pair_example)
    n_pairs     int [G]; twin_share float64 [G]: share of A's word pieces that have a twin in B
    """

    model: str
    groups: tuple[str, ...]
    measures: np.ndarray
    n_pairs: np.ndarray
    twin_share: np.ndarray
    corpus: str = ""
    protocol: str = DEFAULT

    def measure(self, group: str, name: str) -> np.ndarray:
        """float64 [layer, head] of one measure in one group."""
        return self.measures[self.groups.index(group), PAIR_MEASURES.index(name)]

    def to_json(self) -> dict:
        return {"model": self.model, "groups": list(self.groups), "corpus": self.corpus, "protocol": self.protocol,
                "n_pairs": self.n_pairs.tolist(), "twin_share": self.twin_share.round(6).tolist(),
                **{name: {g: self.measure(g, name).round(6).tolist() for g in self.groups} for name in PAIR_MEASURES}}


def pair_attention(
    lm: LoadedModel,
    pairs: Sequence[tuple[str, str]],
    groups: Sequence[str],
    *,
    batch_size: int = 16,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> PairAttention:
    """PAIR_MEASURES of every head over sentence pairs; groups[k] names the group of pairs[k]."""
    if not pairs:
        raise ValueError("no sentence pairs given")
    if len(groups) != len(pairs):
        raise ValueError(f"{len(pairs)} pairs but {len(groups)} group names; give one per pair")
    if any(isinstance(p, str) for p in pairs):
        raise ValueError("every input must be a sentence pair (A, B): sentence A → B attention needs two sentences")
    names = tuple(dict.fromkeys(groups))
    total = None
    n = np.zeros(len(names), dtype=np.int64)
    twins = np.zeros(len(names))
    pieces = np.zeros(len(names))
    for index, enc in encode_stream(lm, list(pairs), batch_size=batch_size, hidden_states=False,
                                    progress=progress, should_stop=should_stop):
        values, n_twin, n_query = pair_example(enc.attentions, enc.tokens, enc.special_mask, enc.segment_ids)
        g = names.index(groups[index])
        if total is None:
            total = np.zeros((len(names),) + values.shape)
        total[g] += values
        n[g] += 1
        twins[g] += n_twin
        pieces[g] += n_query
    measures = total / np.maximum(n, 1)[:, None, None, None]
    return PairAttention(lm.ref, names, measures, n, np.divide(twins, pieces, out=np.zeros(len(names)), where=pieces > 0))


# ---- by gold label --------------------------------------------------------------------------------------


PAIR_DIRECTIONS = ("a_to_b", "b_to_a")
PAIR_DIRECTION_TITLES = {"a_to_b": "A→B", "b_to_a": "B→A"}


def pair_shares(attentions: np.ndarray, special_mask: Sequence[int], segment_ids: Sequence[int],
                words_only: bool = False) -> np.ndarray:
    """float64 [2, layer, head] = PAIR_DIRECTIONS for one pair; attentions [layer, head, T, T] (rows sum to 1).
    NaN for a direction whose query sentence has no word piece (e.g. truncated away)."""
    a = np.asarray(attentions, dtype=np.float64)
    special = np.asarray(special_mask, dtype=bool)
    segments = np.asarray(segment_ids)
    n = a.shape[-1]
    if len(special) != n or len(segments) != n:
        raise ValueError(f"attention covers {n} tokens but the masks have {len(special)} and {len(segments)}")
    if not (segments == 1).any():
        raise ValueError("not a sentence pair: no token of sentence B (segment 1)")
    b_start = int(np.argmax(segments == 1))
    in_a = np.arange(n) < b_start
    out = np.full((2,) + a.shape[:2], np.nan)
    for d, (queries, keys) in enumerate(((in_a & ~special, ~in_a), (~in_a & ~special, in_a))):
        if words_only:
            keys = keys & ~special
        if queries.any():
            out[d] = a[:, :, queries][..., keys].sum(axis=-1).mean(axis=-1)
    return out


def auc_by_label(values: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """Area under the ROC curve of `values` [N, ...] for telling positive[N] (bool) pairs from the others, per
    trailing position (Mann–Whitney U / (n_pos * n_neg), ties count half). NaN values are left out per position."""
    values = np.asarray(values, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    flat = values.reshape(len(values), -1)
    out = np.full(flat.shape[1], np.nan)
    from scipy.stats import rankdata

    for j in range(flat.shape[1]):
        column = flat[:, j]
        keep = ~np.isnan(column)
        pos, neg = int((positive & keep).sum()), int((~positive & keep).sum())
        if pos == 0 or neg == 0:
            continue
        ranks = rankdata(column[keep])  # average ranks: ties count half
        u = ranks[positive[keep]].sum() - pos * (pos + 1) / 2
        out[j] = u / (pos * neg)
    return out.reshape(values.shape[1:])


@dataclass(frozen=True)
class PairHeads:
    """A→B and B→A attention shares per head over labelled sentence pairs.

    labels      (first, second) label names; AUC > 0.5 means the share is higher on the first label's pairs
    pairs       [N] the (A, B) texts, in input order
    gold        int [N]: 0 = labels[0], 1 = labels[1]
    shares      float64 [N, 2, layer, head]: PAIR_DIRECTIONS per pair (see pair_shares; NaN where undefined)
    mean        float64 [2 labels, 2 directions, layer, head]: mean share per label (NaN-skipping)
    auc         float64 [2 directions, layer, head]: separation of the labels by each head's share
    words_only  whether the keys were the other sentence's word pieces only (else bertviz's slices)
    top         how many of the most separating heads to_json's "top_heads" lists
    """

    model: str
    corpus: str
    labels: tuple[str, str]
    pairs: tuple[tuple[str, str], ...]
    gold: np.ndarray
    shares: np.ndarray
    mean: np.ndarray
    auc: np.ndarray
    words_only: bool = False
    top: int = 10

    @property
    def n_pairs(self) -> np.ndarray:
        """int [2]: pairs per label."""
        return np.bincount(self.gold, minlength=2)

    def top_heads(self, k: int = 10, direction: str | None = None) -> list[dict]:
        """The k (direction, layer, head) cells farthest from AUC 0.5, most separating first."""
        directions = [direction] if direction else list(PAIR_DIRECTIONS)
        cells = []
        for name in directions:
            d = PAIR_DIRECTIONS.index(name)
            for layer, head in np.ndindex(*self.auc.shape[1:]):
                value = self.auc[d, layer, head]
                if np.isnan(value):
                    continue
                cells.append({"direction": name, "layer": int(layer), "head": int(head), "auc": float(value),
                              "separation": float(abs(value - 0.5)),
                              f"mean {self.labels[0]}": float(self.mean[0, d, layer, head]),
                              f"mean {self.labels[1]}": float(self.mean[1, d, layer, head])})
        cells.sort(key=lambda c: -c["separation"])
        return cells[:k]

    def to_json(self) -> dict:
        def grid(values: np.ndarray) -> list:
            return np.where(np.isnan(values), None, np.round(values, 6)).tolist()

        return {
            "model": self.model, "corpus": self.corpus, "labels": list(self.labels), "words_only": self.words_only,
            "n_pairs": {label: int(n) for label, n in zip(self.labels, self.n_pairs)},
            "directions": list(PAIR_DIRECTIONS),
            "mean": {label: {d: grid(self.mean[g, i]) for i, d in enumerate(PAIR_DIRECTIONS)}
                     for g, label in enumerate(self.labels)},
            "auc": {d: grid(self.auc[i]) for i, d in enumerate(PAIR_DIRECTIONS)},
            # "layer" as every chart shows it (1..L, core.numbering); top_heads() keeps array indices
            "top_heads": [{**c, "layer": numbering.shown(c["layer"])} for c in self.top_heads(self.top)],
        }


def pair_heads(
    lm: LoadedModel,
    pairs: Sequence[tuple[str, str]],
    gold: Sequence[str],
    labels: tuple[str, str],
    *,
    words_only: bool = False,
    corpus: str = "",
    batch_size: int = 16,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> PairHeads:
    """PairHeads over `pairs`, gold[k] in `labels` naming the label of pairs[k]."""
    if not pairs:
        raise ValueError("no sentence pairs given")
    if len(gold) != len(pairs):
        raise ValueError(f"{len(pairs)} pairs but {len(gold)} labels; give one per pair")
    if any(isinstance(p, str) or len(p) != 2 for p in pairs):
        raise ValueError("every input must be a sentence pair (A, B)")
    unknown = sorted({g for g in gold if g not in labels})
    if unknown:
        raise ValueError(f"labels {unknown} are not among {list(labels)}")
    index = np.array([labels.index(g) for g in gold], dtype=np.int64)
    missing = [labels[i] for i in (0, 1) if not (index == i).any()]
    if missing:
        raise ValueError(f"no pair labelled {' or '.join(missing)}: the comparison needs both labels")
    shares = None
    for i, enc in encode_stream(lm, [tuple(p) for p in pairs], batch_size=batch_size, hidden_states=False,
                                progress=progress, should_stop=should_stop):
        values = pair_shares(enc.attentions, enc.special_mask, enc.segment_ids, words_only=words_only)
        if shares is None:
            shares = np.full((len(pairs),) + values.shape, np.nan)
        shares[i] = values
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a label whose pairs are all NaN in a cell: NaN mean
        mean = np.stack([np.nanmean(shares[index == g], axis=0) for g in (0, 1)])
    auc = auc_by_label(shares, index == 0)
    return PairHeads(lm.ref, corpus, tuple(labels), tuple((str(a), str(b)) for a, b in pairs), index, shares, mean,
                     auc, words_only)


MRPC_LABELS = ("equivalent", "not equivalent")


@dataclass(frozen=True)
class PairHeadsSettings:
    """The paraphrase-heads measurement ("Heads over a dataset" tab, `python -m core pair-attention`,
    core.lens.pair_attention); the corpus (MRPC split and size) is its input."""

    words_only: bool = setting(False, "keys: the other sentence's word pieces only (off: bertviz's slices, which "
                               "count the final [SEP] in B and [CLS] and the middle [SEP] in A)", url="pairs_words_only")
    top: int = setting(10, "how many of the most separating heads to list", low=1, high=100_000, url=None)
    seed: int = setting(0, "seed of the corpus sample", low=0, high=1_000_000, url=None)
    batch_size: int = setting(16, "pairs encoded at once", low=1, high=4096, url=None)


def pair_heads_of(lm: LoadedModel, inputs, settings: PairHeadsSettings, progress: ProgressCallback = None,
                  should_stop: StopCheck = None, corpus: str = "") -> PairHeads:
    """PairHeads of inputs (pairs, gold labels among MRPC_LABELS) with these settings: the declaration's `run`."""
    pairs, gold = inputs
    result = pair_heads(lm, pairs, gold, MRPC_LABELS, words_only=settings.words_only, corpus=corpus,
                        batch_size=settings.batch_size, progress=progress, should_stop=should_stop)
    return replace(result, top=settings.top)


def mrpc_pairs(spec: str, seed: int = 0, limit: int | None = None) -> tuple[list[tuple[str, str]], list[str], str]:
    """(pairs, gold labels "equivalent" / "not equivalent", corpus name) from a corpus spec such as mrpc:test:200."""
    corpus = corpora.resolve(spec, seed, limit=limit).take(limit)
    pairs, groups = labelled_pairs(corpus)
    if not pairs:
        raise ValueError(f"{spec} has no sentence pairs; give MRPC (mrpc[:SPLIT[:N]]) or another pair corpus")
    return pairs, groups, corpus.name


ANALYSIS = Analysis(
    name="pair-attention", view="attention", command="pair-attention", lens="pair_attention",
    settings=PairHeadsSettings, run=pair_heads_of, charts="core.charts.pair_attention:separation_charts",
    title="Heads over a dataset", order=25,
    summary="A→B and B→A attention share per head on MRPC, by gold label; the heads that separate paraphrases "
            "from non-paraphrases most (the bertviz MRPC report)",
)
