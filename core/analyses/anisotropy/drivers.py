"""The two corpus passes behind a LayerProfile, one per protocol (see core.analyses.anisotropy), and one word's
pass across the sentences it occurs in. Each streams the corpus through the model once (hidden states only)."""

from __future__ import annotations

from collections import Counter

import numpy as np

from core.analyses.anisotropy.accumulator import RunningSums
from core.analyses.anisotropy.measures import (WordDrilldown, baseline_cosine, baseline_sample,
                                               draw_cross_sentence_pairs, max_explainable_variance, pair_cosine,
                                               paper_intra_sentence, paper_is_punct, random_words_mev,
                                               sentence_units, unit_keys, word_drilldown, word_pair_sample)
from core.analyses.anisotropy.profile import PAPER_PROTOCOL, AnisotropySettings, LayerProfile, build_profile
from core.data.corpus import Corpus
from core.model import distributed, overlap
from core.model.encoding import encode_share, encode_share_batches, encode_stream, pool_batch_words, tokenize
from core.progress import ProgressCallback, StopCheck, check_stop


def _choose_words(keys: list[tuple[str, ...]], min_contexts: int, limit: int) -> tuple[dict[str, int], int]:
    """(word -> row of the words in min_contexts+ sentences, most frequent first, at most `limit`; the most
    sentences any word is in)."""
    contexts = Counter(key for sentence in keys for key in set(sentence))
    eligible = sorted((k for k, n in contexts.items() if n >= min_contexts), key=lambda k: (-contexts[k], k))
    return {k: row for row, k in enumerate(eligible[:limit])}, max(contexts.values(), default=0)


def _alignment_sample(corpus: Corpus, settings: AnisotropySettings) -> tuple[np.ndarray, dict[int, int]]:
    """At most max_alignment_pairs seeded positive pairs [P, 2] of the corpus, and sentence -> row of its vector."""
    rng = np.random.default_rng(settings.seed)
    corpus_pairs = np.array(corpus.pairs, dtype=np.int64).reshape(-1, 2)
    if len(corpus_pairs) > settings.max_alignment_pairs:
        corpus_pairs = corpus_pairs[np.sort(rng.choice(len(corpus_pairs), settings.max_alignment_pairs, replace=False))]
    return corpus_pairs, {int(s): row for row, s in enumerate(np.unique(corpus_pairs))}


def measure_corpus(
    lm,
    corpus: Corpus,
    settings: AnisotropySettings = AnisotropySettings(),
    *,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> LayerProfile:
    """Run the corpus through the model once (hidden states only) and return every measure.

    Kept in memory: the vectors of the 2 * n_pairs sampled words, a running sum per tracked word type
    (at most max_word_types), per-layer sums and a [L+1, D, D] second moment, and the sentence vectors of at
    most max_alignment_pairs pairs. Under the "ethayarajh" protocol it also keeps every occurrence vector of
    every counted token type (see _measure_paper). Raises core.progress.Cancelled when should_stop() turns True."""
    sentences = list(corpus.sentences)
    if len(sentences) < 2:
        raise ValueError("The corpus needs at least 2 sentences to compare words across sentences.")
    if settings.protocol == PAPER_PROTOCOL:
        return _measure_paper(lm, corpus, settings, progress=progress, should_stop=should_stop)
    # One tokenization serves both the choice of pairs and tracked words here and the forward pass below.
    tokenized = tokenize(lm, sentences)
    keys = [unit_keys(t, settings.include_special) for t in tokenized]
    counts = np.array([len(k) for k in keys], dtype=np.int64)
    unit_sentence = np.repeat(np.arange(len(sentences)), counts)
    unit_position = np.arange(len(unit_sentence)) - np.repeat(np.cumsum(counts) - counts, counts)
    pairs = draw_cross_sentence_pairs(unit_sentence, settings.n_pairs, settings.seed)
    needed, slot_of = np.unique(pairs, return_inverse=True)
    slot_of = slot_of.reshape(pairs.shape)
    wanted: dict[int, list[tuple[int, int]]] = {}
    for slot, unit in enumerate(needed):
        wanted.setdefault(int(unit_sentence[unit]), []).append((int(unit_position[unit]), slot))
    corpus_pairs, alignment_sentences = _alignment_sample(corpus, settings)
    tracked, most_contexts = _choose_words(keys, settings.min_contexts, settings.max_word_types)

    sums = RunningSums(
        n_layers=lm.num_layers + 1,
        dim=lm.hidden_size,
        tracked=tracked,
        wanted=wanted,
        n_slots=len(needed),
        alignment_sentences=alignment_sentences,
    )

    def accumulate(batch) -> None:
        # The whole batch at once: pieces pooled to words in one gather, no per-sentence Encoding.
        vectors, units = pool_batch_words(batch, settings.include_special)  # [U, L+1, D], [B]
        sums.add_batch(batch.indices, [keys[i] for i in batch.indices], vectors, units)

    batches = encode_share_batches(
        lm, tokenized, batch_size=settings.batch_size, attentions=False, hidden_states=True,
        progress=progress, should_stop=should_stop,
    )
    n_truncated = sum(int(tokenized[i].n_tokens_full > tokenized[i].n_tokens)
                      for i in distributed.current().share(len(tokenized)))
    overlap.overlapped(lm, batches, accumulate)
    sums.flush()
    sums.reduce()
    n_truncated = int(distributed.current().all_reduce_sum(np.array([n_truncated]))[0])

    # float32 on purpose: the sample is the largest array the pass holds; the mean is summed in float64.
    u = sums.sampled / np.maximum(np.linalg.norm(sums.sampled, axis=-1, keepdims=True), 1e-30)
    random_cosine = np.einsum("pld,pld->l", u[slot_of[:, 0]], u[slot_of[:, 1]], dtype=np.float64) / len(pairs)
    n = sums.word_counts[:, None].astype(np.float64)
    squared = np.einsum("wld,wld->wl", sums.word_sums, sums.word_sums, dtype=np.float64)  # no float64 copy
    word_self = (squared - n) / (n * (n - 1)) if len(n) else np.zeros((0, sums.n_layers))
    self_sim = word_self.mean(axis=0) if len(n) else np.full(sums.n_layers, np.nan)
    intra = sums.intra_sum / sums.intra_count if sums.intra_count else np.full(sums.n_layers, np.nan)
    return build_profile(
        lm, corpus, settings, sums, corpus_pairs,
        random_cosine=random_cosine,
        self_similarity=self_sim,
        intra_sentence=intra,
        words=tuple(sums.tracked),
        word_contexts=sums.word_counts.copy(),
        word_self_similarity=word_self,
        n_pairs=len(pairs),
        n_truncated=n_truncated,
        most_word_contexts=most_contexts,
    )


def _measure_paper(lm, corpus: Corpus, settings: AnisotropySettings, *, progress: ProgressCallback,
                   should_stop: StopCheck) -> LayerProfile:
    """measure_corpus under the "ethayarajh" protocol. Units are the tokenizer's WordPiece tokens without
    [CLS]/[SEP], as preprocess.BertBaseCased.vectorize keeps them. Token types with >= min_contexts occurrences
    (punctuation excluded, every occurrence counted) get a row per occurrence in one [R, L+1, D] float32 store:
    self-similarity samples pairs among them and MEV needs them all. The baseline sample and intra-sentence
    similarity come from BaselineSample over every token of a sentence, punctuation included, as his vectors
    file holds them. exact_cosine, top_pc_variance and alignment/uniformity are BERT Lens's, over the same tokens."""
    sentences = list(corpus.sentences)
    tokenized = tokenize(lm, sentences)
    pieces = [tuple(t for t, special in zip(item.tokens, item.special_mask) if not special) for item in tokenized]
    occurrences: dict[str, list[tuple[int, int]]] = {}
    for s, tokens in enumerate(pieces):
        for k, token in enumerate(tokens):
            if not paper_is_punct(token):
                occurrences.setdefault(token, []).append((s, k))
    words = sorted((w for w, o in occurrences.items() if len(o) >= settings.min_contexts),
                   key=lambda w: (-len(occurrences[w]), w))
    counts = np.array([len(occurrences[w]) for w in words], dtype=np.int64)
    starts = np.r_[0, np.cumsum(counts)[:-1]].astype(np.int64)
    rows_of_sentence: dict[int, list[tuple[int, int]]] = {}
    for w, start in zip(words, starts):
        for offset, (s, k) in enumerate(occurrences[w]):
            rows_of_sentence.setdefault(s, []).append((k, int(start + offset)))

    n_layers, dim = lm.num_layers + 1, lm.hidden_size
    needed = int(counts.sum()) * n_layers * dim * 4
    if needed > settings.max_store_bytes:
        raise ValueError(
            f"The paper protocol keeps every occurrence of every token seen {settings.min_contexts}+ times "
            f"({int(counts.sum()):,} vectors, {needed / 2**30:.1f} GiB here, over the {settings.max_store_bytes / 2**30:.1f} "
            "GiB allowed): use fewer sentences."
        )
    store = np.zeros((int(counts.sum()), n_layers, dim), dtype=np.float32)
    sample = baseline_sample([len(p) for p in pieces], n_layers, settings.n_baseline_sentences, settings.n_pairs, settings.seed)
    slot_of = {int(s): slot for slot, s in enumerate(sample.sentences)}
    picked = np.zeros((len(sample.sentences), n_layers, dim), dtype=np.float32)
    intra = np.zeros((len(sample.sentences), n_layers))
    corpus_pairs, alignment_sentences = _alignment_sample(corpus, settings)
    sums = RunningSums(n_layers=n_layers, dim=dim, tracked={}, wanted={}, n_slots=0, alignment_sentences=alignment_sentences)
    every_layer = np.arange(n_layers)
    n_truncated = 0
    for index, encoding in encode_share(
        lm, tokenized, batch_size=settings.batch_size, attentions=False, hidden_states=True,
        progress=progress, should_stop=should_stop,
    ):
        n_truncated += int(encoding.truncated)
        vectors = np.ascontiguousarray(encoding.hidden_states[:, ~encoding.special_mask].transpose(1, 0, 2))  # [T, L+1, D]
        for k, row in rows_of_sentence.get(index, ()):
            store[row] = vectors[k]
        slot = slot_of.get(index)
        if slot is not None:
            picked[slot] = vectors[sample.tokens[slot], every_layer]
            intra[slot] = paper_intra_sentence(vectors)
        sums.add(index, pieces[index], vectors)
    sums.flush()
    sums.reduce()
    # Each row of these was filled by the rank that encoded its sentence (zeros elsewhere).
    store, picked, intra, n_truncated = distributed.current().all_reduce_sum(store, picked, intra, np.array([n_truncated]))
    n_truncated = int(n_truncated[0])

    word_self = np.zeros((len(words), n_layers))
    word_mev = np.zeros((len(words), n_layers))
    for row, (start, n) in enumerate(zip(starts, counts)):
        if row % 64 == 0:
            check_stop(should_stop)
        occurrence_vectors = store[start : start + n]
        word_self[row] = pair_cosine(occurrence_vectors, word_pair_sample(int(n), settings.max_pairs_per_word, settings.seed, row))
        word_mev[row] = max_explainable_variance(occurrence_vectors)
    missing = np.full(n_layers, np.nan)
    self_sim = word_self.mean(axis=0) if len(words) else missing
    mev = word_mev.mean(axis=0) if len(words) else missing
    return build_profile(
        lm, corpus, settings, sums, corpus_pairs,
        random_cosine=baseline_cosine(picked, sample.pairs),
        self_similarity=self_sim,
        intra_sentence=intra.mean(axis=0),
        words=tuple(words),
        word_contexts=counts,
        word_self_similarity=word_self,
        n_pairs=settings.n_pairs,
        n_truncated=n_truncated,
        mev=mev,
        mev_random=random_words_mev(picked),
        word_mev=word_mev,
        n_baseline_sentences=len(sample.sentences),
        most_word_contexts=max((len(o) for o in occurrences.values()), default=0),
    )


def collect_word(
    lm,
    corpus: Corpus,
    word: str,
    *,
    max_contexts: int = 200,
    batch_size: int = 32,
    progress: ProgressCallback = None,
    should_stop: StopCheck = None,
) -> WordDrilldown:
    """Encode only the corpus sentences that contain `word` (a whole word, any case) and drill down."""
    target = word.strip().lower()
    if not target or len(target.split()) > 1:
        raise ValueError("Type one word (no spaces) to see it across contexts.")
    tokenized = tokenize(lm, corpus.sentences)
    keys = [unit_keys(t) for t in tokenized]
    hits = [i for i, k in enumerate(keys) if target in k][:max_contexts]
    if len(hits) < 2:
        common = Counter(key for k in keys for key in set(k) if key.isalpha() and len(key) > 3).most_common(8)
        raise ValueError(
            f"'{word}' occurs in {len(hits)} sentence(s) of this corpus; it needs at least 2. "
            f"Words with many contexts here: {', '.join(w for w, _ in common)}."
        )
    vectors: dict[int, np.ndarray] = {}
    for index, encoding in encode_stream(
        lm, [tokenized[i] for i in hits], batch_size=batch_size, attentions=False,
        progress=progress, should_stop=should_stop,
    ):
        found_keys, unit_vectors = sentence_units(encoding)
        vectors[index] = unit_vectors[found_keys.index(target)]
    return word_drilldown(target, np.stack([vectors[i] for i in range(len(hits))]), [corpus.sentences[i] for i in hits])
