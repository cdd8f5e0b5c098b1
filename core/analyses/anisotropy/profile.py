"""What an anisotropy pass is asked (AnisotropySettings) and what it returns (LayerProfile), the one builder of
a LayerProfile from a pass's running sums, and the published curves a profile is drawn against."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np

from core import protocols, references, validation
from core.contract import setting
from core.analyses.anisotropy.accumulator import RunningSums
from core.analyses.anisotropy.measures import top_pc_share_from_covariance
from core.data.corpus import Corpus
from core.model import distributed

PAPER_PROTOCOL = "ethayarajh"
PROTOCOLS = (protocols.DEFAULT, PAPER_PROTOCOL)

MEASURES: dict[str, str] = {
    "random_cosine": "Random-word cosine (baseline)",
    "self_similarity": "Self-similarity",
    "adjusted_self_similarity": "Self-similarity − baseline",
    "intra_sentence": "Intra-sentence similarity",
    "adjusted_intra_sentence": "Intra-sentence similarity − baseline",
    "mev": "Maximum explainable variance (MEV), per word",
    "mev_random": "MEV of random words (baseline)",
    "adjusted_mev": "MEV − random-word MEV",
    "top_pc_variance": "Variance on the top PC, all words (BERT Lens's measure)",
    "exact_cosine": "All-pairs cosine (exact baseline)",
    "alignment": "Alignment (lower = pairs closer)",
    "uniformity": "Uniformity (lower = more spread out)",
}


@dataclass(frozen=True)
class AnisotropySettings:
    """What `measure_corpus` does, declared once (core.contract): the CLI's options, core.lens.anisotropy's
    keyword arguments, the page's URL and widgets are made from these fields.

    protocol: "bertlens" or "ethayarajh" (see core.analyses.anisotropy). baseline: which cosine the adjusted measures
    subtract. n_pairs: random pairs for the baseline. min_contexts: sentences a word needs ("bertlens") or
    occurrences a token type needs ("ethayarajh", the paper's min_count=5). max_word_types: "bertlens" only.
    n_baseline_sentences, max_pairs_per_word, max_store_bytes: "ethayarajh" only (the paper's 1,000 sampled
    sentences and 1,000 pairs per word; the memory the kept occurrence vectors may take)."""

    n_pairs: int = setting(1000, "random word pairs for the baseline (each keeps two word vectors of every layer "
                           "until the pass ends; fewer than 100 is a noisy baseline)", low=10, high=10_000,
                           url="pairs", cli="pairs")
    seed: int = setting(0, "seed for the random pairs and the corpus sample", low=0, high=1_000_000)
    min_contexts: int = setting(5, "sentences a word needs for self-similarity (under the ethayarajh protocol: "
                                "occurrences a token needs)", low=2, high=50, url="k")
    include_special: bool = setting(False, "count [CLS]/[SEP] as words (the paper protocol always leaves them out)",
                                    url="special")
    baseline: Literal["random", "exact"] = setting("random", "the cosine the adjusted measures subtract: random "
                                                   "pairs (as in the paper) or all pairs (exact)",
                                                   choices=("random", "exact"))
    max_word_types: int = 1000
    max_alignment_pairs: int = 500
    batch_size: int = setting(32, "sentences encoded at once", low=1, high=4096, url=None)
    protocol: str = setting(protocols.DEFAULT, "bertlens: whole words, first occurrence per sentence. ethayarajh: "
                            "the paper's protocol (kawine/contextual): WordPiece tokens, punctuation excluded from "
                            "self-similarity and MEV, every occurrence, sampled pairs per word, a baseline from "
                            "sampled sentences; adds MEV", choices=PROTOCOLS, url=None)
    n_baseline_sentences: int = setting(1000, "ethayarajh: sentences sampled for the random baseline, one token "
                                        "each", low=2, high=1_000_000, url=None, cli="baseline-sentences")
    max_pairs_per_word: int = setting(1000, "ethayarajh: at most this many sampled occurrence pairs per word",
                                      low=1, high=1_000_000, url=None, cli="pairs-per-word")
    max_store_bytes: int = 3 * 2**30

    def __post_init__(self):
        protocols.check(self.protocol, PROTOCOLS)
        if self.baseline not in ("random", "exact"):
            raise ValueError(f"baseline must be 'random' or 'exact', not {self.baseline!r}.")
        if self.min_contexts < 2:
            raise ValueError("min_contexts must be at least 2: a word in one sentence has nothing to compare with.")
        if self.protocol == PAPER_PROTOCOL and self.include_special:
            raise ValueError("The paper protocol leaves [CLS] and [SEP] out (preprocess.py drops them); "
                             "turn off 'count [CLS]/[SEP] as words' or use the bertlens protocol.")
        if self.max_pairs_per_word < 1 or self.n_baseline_sentences < 2:
            raise ValueError("max_pairs_per_word must be at least 1 and n_baseline_sentences at least 2.")


def _finite(values) -> list:
    return [None if not np.isfinite(v) else round(float(v), 6) for v in values]


@dataclass(frozen=True)
class LayerProfile(validation.CorpusCuts):
    """Every measure for one model on one corpus. Arrays over layers are [L+1], index 0 = input embeddings.

    layers                    [L+1] int
    random_cosine             [L+1] mean cosine of n_pairs random cross-sentence word pairs
    exact_cosine              [L+1] mean over all cross-sentence word pairs
    self_similarity           [L+1] mean over `words`; NaN when no word has min_contexts contexts
    adjusted_self_similarity  [L+1] self_similarity − baseline
    intra_sentence            [L+1]; adjusted_intra_sentence [L+1] likewise
    top_pc_variance           [L+1] in 0..1 (BERT Lens's own measure: all units, not per word)
    alignment, uniformity     [L+1] or None when the corpus has no pairs
    words                     [W] word types used for self-similarity; word_contexts [W] int: sentences
                              ("bertlens") or occurrences ("ethayarajh") of each
    word_self_similarity      [W, L+1]
    mev, mev_random, adjusted_mev   [L+1], "ethayarajh" only (None under "bertlens"): the mean over `words` of
                              each word's MEV, the random-word MEV, and their difference
    word_mev                  [W, L+1] or None, likewise
    n_baseline_sentences      sentences sampled for the baseline ("ethayarajh"; 0 under "bertlens")
    most_word_contexts        the most sentences (occurrences) any one word (token) type had: why `words` may be
                              empty; -1 when the pass did not count it
    warnings                  sentences for a person on measures the corpus left undefined (NaN): no word in
                              min_contexts contexts leaves self-similarity (and MEV) empty
    Units are words under "bertlens" and WordPiece tokens under "ethayarajh" (n_tokens counts them).
    """

    model: str
    corpus: str
    settings: AnisotropySettings
    layers: np.ndarray
    random_cosine: np.ndarray
    exact_cosine: np.ndarray
    self_similarity: np.ndarray
    adjusted_self_similarity: np.ndarray
    intra_sentence: np.ndarray
    adjusted_intra_sentence: np.ndarray
    top_pc_variance: np.ndarray
    alignment: np.ndarray | None
    uniformity: np.ndarray | None
    words: tuple[str, ...]
    word_contexts: np.ndarray
    word_self_similarity: np.ndarray
    n_sentences: int
    n_tokens: int
    n_pairs: int
    n_alignment_pairs: int
    n_truncated: int = 0
    mev: np.ndarray | None = None
    mev_random: np.ndarray | None = None
    adjusted_mev: np.ndarray | None = None
    word_mev: np.ndarray | None = None
    n_baseline_sentences: int = 0
    world_size: int = 1  # processes that shared the pass (core.model.distributed)
    # word pieces cut off each sentence (core.validation.CorpusCuts): set by a caller that counted them
    # (core.model.encoding.counting_cuts); None otherwise
    dropped: tuple[int, ...] | None = None
    max_length: int = 0
    most_word_contexts: int = -1

    @property
    def protocol(self) -> str:
        return self.settings.protocol

    @property
    def warnings(self) -> tuple[str, ...]:
        """Why a measure is NaN, said once instead of an empty curve (issue 48: lens.anisotropy(model,
        ["a b c", "d e f"]) gave NaN self-similarity without a word)."""
        if len(self.words):
            return ()
        paper = self.protocol == PAPER_PROTOCOL
        unit, contexts = ("token", "occurrences") if paper else ("word", "sentences")
        k = self.settings.min_contexts
        seen = (f" (the most any {unit} has here is {self.most_word_contexts})" if self.most_word_contexts >= 0 else "")
        measures = "self-similarity, its adjusted form and MEV are" if paper else "self-similarity and its adjusted form are"
        fix = (f"the corpus has only {self.n_sentences} sentences: use more" if not paper and self.n_sentences < k
               else "use a larger corpus in which words repeat")
        return (f"No {unit} occurs in {k} or more {contexts}{seen}, so {measures} undefined (left empty, NaN): "
                f"self-similarity compares one {unit}'s vectors in different contexts. {fix.capitalize()}, or "
                f"lower k, the {contexts} a {unit} needs (min_contexts, at least 2).",)

    @property
    def baseline(self) -> np.ndarray:
        return self.exact_cosine if self.settings.baseline == "exact" else self.random_cosine

    def to_json(self) -> dict:
        """Plain JSON types; NaN becomes null."""

        def clean(values):
            if values is None:
                return None
            return [None if not np.isfinite(v) else round(float(v), 6) for v in values]

        out = {"model": self.model, "corpus": self.corpus, "layers": [int(x) for x in self.layers]}
        for name in (
            "random_cosine", "exact_cosine", "self_similarity", "adjusted_self_similarity", "intra_sentence",
            "adjusted_intra_sentence", "top_pc_variance", "alignment", "uniformity", "mev", "mev_random",
            "adjusted_mev",
        ):
            out[name] = clean(getattr(self, name))
        out.update(
            protocol=self.protocol, unit="WordPiece token" if self.protocol == PAPER_PROTOCOL else "word",
            n_baseline_sentences=self.n_baseline_sentences, max_pairs_per_word=self.settings.max_pairs_per_word,
            baseline=self.settings.baseline, n_tokens=self.n_tokens, n_pairs=self.n_pairs,
            n_sentences=self.n_sentences, n_word_types=len(self.words), min_contexts=self.settings.min_contexts,
            include_special=self.settings.include_special, seed=self.settings.seed,
            n_alignment_pairs=self.n_alignment_pairs, n_truncated=self.n_truncated, world_size=self.world_size,
            warnings=list(self.warnings), words=self.word_rows(),
        )
        return out

    def word_rows(self) -> list[dict]:
        """Per word (token) type: its contexts, self-similarity and (paper protocol) MEV at each layer, as the
        paper's code writes them per word; values rounded to 6 places, NaN as null."""
        rows = []
        for i, word in enumerate(self.words):
            row = {"word": word, "contexts": int(self.word_contexts[i]),
                   "self_similarity": _finite(self.word_self_similarity[i])}
            if self.word_mev is not None:
                row["mev"] = _finite(self.word_mev[i])
            rows.append(row)
        return rows


def build_profile(
    lm,
    corpus: Corpus,
    settings: AnisotropySettings,
    sums: RunningSums,
    corpus_pairs: np.ndarray,
    *,
    random_cosine: np.ndarray,
    self_similarity: np.ndarray,
    intra_sentence: np.ndarray,
    words: Sequence[str],
    word_contexts: np.ndarray,
    word_self_similarity: np.ndarray,
    n_pairs: int,
    n_truncated: int,
    mev: np.ndarray | None = None,
    mev_random: np.ndarray | None = None,
    word_mev: np.ndarray | None = None,
    n_baseline_sentences: int = 0,
    most_word_contexts: int = -1,
) -> LayerProfile:
    """The LayerProfile of a finished pass (sums reduced over the ranks): the measures the sums give (the exact
    baseline, the top PC's share, alignment and uniformity of corpus_pairs) beside those the protocol's driver
    measured, and each adjusted measure against the baseline the settings chose."""
    exact = sums.exact_cosine()
    baseline = exact if settings.baseline == "exact" else random_cosine
    aligned = sums.alignment(corpus_pairs)
    return LayerProfile(
        model=lm.ref,
        corpus=corpus.name,
        settings=settings,
        layers=np.arange(sums.n_layers),
        random_cosine=random_cosine,
        exact_cosine=exact,
        self_similarity=self_similarity,
        adjusted_self_similarity=self_similarity - baseline,
        intra_sentence=intra_sentence,
        adjusted_intra_sentence=intra_sentence - baseline,
        top_pc_variance=top_pc_share_from_covariance(sums.covariance()),
        alignment=aligned.alignment if aligned else None,
        uniformity=aligned.uniformity if aligned else None,
        words=tuple(words),
        word_contexts=word_contexts,
        word_self_similarity=word_self_similarity,
        n_sentences=len(corpus.sentences),
        n_tokens=int(sums.count_units),
        n_pairs=n_pairs,
        n_alignment_pairs=len(corpus_pairs),
        n_truncated=n_truncated,
        mev=mev,
        mev_random=mev_random,
        adjusted_mev=None if mev is None else mev - mev_random,
        word_mev=word_mev,
        n_baseline_sentences=n_baseline_sentences,
        world_size=distributed.current().world_size,
        most_word_contexts=most_word_contexts,
    )


def reference_for(measure: str):
    """Ethayarajh's published curve for `measure` (a core.references.Reference), or None when the paper has none."""
    return next((r for r in references.for_study("ethayarajh") if r.measure == measure), None)


def reference_model_for(reference, models: Sequence[str], protocol: str) -> str:
    """The model an overlay is judged against: one whose model and protocol match the paper's if shown, else the
    first, so the label says "same model and protocol" only when that is true of a line on the chart."""
    return next((m for m in models if references.overlay_kind(reference, m, protocol) == "same"), models[0])
