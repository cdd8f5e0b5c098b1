"""Anisotropy by layer: how alike a model's word vectors are, layer by layer (Ethayarajh 2019, "How
contextual are contextualized word representations?", EMNLP), plus measures beyond the paper.

Two protocols (`AnisotropySettings.protocol`, see core.protocols):

"bertlens" (the default, readable): a unit is a whole word, its word pieces averaged ("bank" and "##ing" never
stand alone); special tokens ([CLS], [SEP]) are left out unless asked for. Word types are compared lowercased.
    random_cosine       mean cosine of two words drawn at random from *different* sentences (seeded pairs)
    self_similarity     per word type seen in >= k sentences: mean cosine between its vectors in different
                        sentences (first occurrence per sentence), averaged over at most max_word_types types
    intra_sentence      per sentence: mean cosine between each word and the sentence's mean vector, averaged
                        over every sentence

"ethayarajh" (the paper's, as kawine/contextual's preprocess.py and analyze.py compute it): a unit is a WordPiece
token ([CLS]/[SEP] dropped), compared case-sensitively as the tokenizer writes it ("##ing" is a word of its own).
    self_similarity     per token type with >= min_contexts occurrences (punctuation excluded, every occurrence,
                        repeats inside one sentence too): mean cosine over its ordered occurrence pairs (i, j),
                        i != j, at most max_pairs_per_word of them sampled; averaged over the types
    mev                 per such type: its maximum explainable variance, the first principal component's share of
                        the variance of its occurrence vectors (centred, as sklearn's PCA in his code); averaged
    random_cosine       n_baseline_sentences sentences sampled, one token drawn in each (anew per layer, as his
                        loop does; punctuation included: his vectors file keeps every token), then n_pairs pairs
                        of those tokens drawn independently
    mev_random          the same sampled tokens' first-singular-vector share of variance (his TruncatedSVD)
    intra_sentence      over the same sampled sentences: mean over tokens of cos(token, sentence mean), averaged

Both protocols (layer index l runs 0..L, 0 = input embeddings; each measure [L+1]):
    exact_cosine        mean cosine over *all* pairs of units from different sentences (exact, from running sums)
    adjusted_*          the measure minus the chosen baseline (random or exact), as in the paper
    top_pc_variance     BERT Lens's own measure, not the paper's MEV: share of the variance of *all* units on
                        their first principal component
    alignment, uniformity   Wang & Isola (2020), on mean-pooled sentence vectors of (at most max_alignment_pairs,
                        seeded) positive pairs of the corpus; uniformity over every two of those sentences

Pure functions take arrays (measures.py); `measure_corpus` (drivers.py) streams a corpus through the model. Under
"bertlens" it keeps only sampled vectors and running sums (accumulator.py; memory flat in the corpus); under
"ethayarajh" it must also keep every occurrence of every counted type (MEV needs them all), so memory grows with
the corpus (checked up front). Both drivers end in profile.build_profile, the one LayerProfile builder.
No streamlit here.
"""

from core.analyses.anisotropy.accumulator import RunningSums
from core.analyses.anisotropy.drivers import collect_word, measure_corpus
from core.analyses.anisotropy.measures import (AlignmentUniformity, BaselineSample, RandomPairCosine, SelfSimilarity,
                                               WordDrilldown, all_pairs_cosine, alignment_uniformity, baseline_cosine,
                                               baseline_sample, draw_cross_sentence_pairs, intra_sentence_similarity,
                                               max_explainable_variance, mean_pairwise_cosine, pair_cosine,
                                               paper_intra_sentence, paper_is_punct, random_pair_cosine,
                                               random_words_mev, sample_ordered_pairs, self_similarity,
                                               sentence_units, top_pc_share_from_covariance, top_pc_variance_share,
                                               unit_keys, unit_length, word_drilldown, word_pair_sample)
from core.analyses.anisotropy.profile import (MEASURES, PAPER_PROTOCOL, PROTOCOLS, AnisotropySettings, LayerProfile,
                                              build_profile, reference_for, reference_model_for)

from core.contract import Analysis

ANALYSIS = Analysis(
    name="anisotropy", view="anisotropy", command="anisotropy", lens="anisotropy", settings=AnisotropySettings,
    run=measure_corpus, charts="core.charts.anisotropy:profile_charts", title="Anisotropy by layer",
    summary="how alike word vectors are, layer by layer (Ethayarajh 2019)",
)

_RunningSums = RunningSums  # its name before the split, kept for tests/unit/test_anisotropy.py

__all__ = [
    "ANALYSIS", "AlignmentUniformity", "AnisotropySettings", "BaselineSample", "LayerProfile", "MEASURES", "PAPER_PROTOCOL",
    "PROTOCOLS", "RandomPairCosine", "RunningSums", "SelfSimilarity", "WordDrilldown", "all_pairs_cosine",
    "alignment_uniformity", "baseline_cosine", "baseline_sample", "build_profile", "collect_word",
    "draw_cross_sentence_pairs", "intra_sentence_similarity", "max_explainable_variance", "mean_pairwise_cosine",
    "measure_corpus", "pair_cosine", "paper_intra_sentence", "paper_is_punct", "random_pair_cosine",
    "random_words_mev", "reference_for", "reference_model_for", "sample_ordered_pairs", "self_similarity",
    "sentence_units", "top_pc_share_from_covariance", "top_pc_variance_share", "unit_keys", "unit_length",
    "word_drilldown", "word_pair_sample",
]
