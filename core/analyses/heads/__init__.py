"""Attention heads over a dataset, one module per analysis: Clark et al. (2019) statistics and Kovaleva et al.
(2019) pattern types (survey.py), the change of attention after fine-tuning (change.py), sentence-pair attention as
bertviz shows it and by gold label (pairs.py), syntactic heads on a dependency treebank (syntax.py); what they
share (protocols, head names, token roles) is in roles.py. Every public name is here too: `heads.survey_heads`.

Pure functions work on one example's attention array `[layer, head, query, key]` (rows sum to 1); the
`survey_heads`, `attention_change`, `syntax_heads`, `pair_attention` and `pair_heads` drivers stream a corpus through a model
one batch at a time (progress(done, total), should_stop() polled between batches) and return frozen results.

Two protocols (core.protocols): "bertlens" (the app's readable default) and "clark", Clark et al.'s own rules as
in clarkkev/attention-analysis (General_Analysis.ipynb, Syntax_Analysis.ipynb):
- punctuation is the tokens "." and "," only (bertlens: any Unicode punctuation piece);
- entropy is taken of 0.9999·a + 0.0001/T, his smoothing (bertlens: a clipped at 1e-12);
- a syntactic head is scored in both directions, dependent→head (the dependent's most-attended other word) and
  head→dependent (the word that attends most to the dependent, i.e. the transposed map), and per relation the
  better of the two is kept; every word is scored, so a root (gold head ROOT, which attention cannot point at)
  counts as a miss; the possessor of a `poss` relation followed by "'s" is scored by the prediction of that "'s";
  the fixed-offset baseline tries offsets -3..+2 only, clamped to the sentence (a word predicted left of the
  first word is predicted ROOT); sentences over 128 word pieces are skipped (his extraction's limit);
- layers and heads are labelled from 1 ("8-10" = layer 8, head 10), as in the paper.
"""

from core.analyses.heads.roles import (
    PROTOCOLS, PROTOCOL_HELP, CLARK_PUNCTUATION, head_label, TokenRoles, token_roles, roles_of, check_attention,
)
from core.analyses.heads.survey import (
    STAT_NAMES, STAT_TITLES, PATTERNS, VERTICAL, DIAGONAL, MIXED_EACH, MIXED_TOTAL, BLOCK, example_stats,
    pattern_features, classify_patterns, example_patterns, PatternExample, HeadSurvey, survey_heads,
    SurveySettings, run_survey,
)
from core.analyses.heads.change import (
    attention_cosine, AttentionChange, attention_change, layer_change, change_ranks, last_layers_change_most,
    ChangeSettings, run_attention_change,
)
from core.analyses.heads.pairs import (
    PAIR_LABELS, labelled_pairs, PAIR_MEASURES, pair_example, PairAttention, pair_attention, PAIR_DIRECTIONS,
    PAIR_DIRECTION_TITLES, pair_shares, auc_by_label, PairHeads, pair_heads, mrpc_pairs,
)
from core.analyses.heads.syntax import (
    CLARK_OFFSETS, CLARK_MAX_TOKENS, CLARK_POSSESSIVES, POSS_RELATIONS, DIRECTIONS, predicted_heads,
    predicted_heads_reverse, clark_hits, clark_offset_guess, SyntaxHeads, SyntaxTally, syntax_heads,
    SyntaxSettings, run_syntax_heads,
)
from core.contract import Analysis

# The "Heads over a dataset" parts, declared once (core.contract); ablation is declared in core.analyses.ablation
# (it needs torch at import, this package must not).
SURVEY = Analysis(
    name="heads", view="attention", command="heads", lens="heads", settings=SurveySettings, run=run_survey,
    charts="core.charts.heads_dataset:survey_charts", title="Heads over a dataset: statistics and pattern types",
    summary="Clark statistics and Kovaleva pattern types of every head over a corpus", order=20,
)
CHANGE = Analysis(
    name="attention-change", view="attention", command="attention-change", lens="attention_change",
    settings=ChangeSettings, run=run_attention_change, charts="core.charts.heads_dataset:change_charts",
    title="Heads over a dataset: change after fine-tuning",
    summary="per-head cosine between two models' attention maps", order=22,
)
SYNTAX = Analysis(
    name="syntax-heads", view="attention", command="syntax-heads", lens="syntax_heads", settings=SyntaxSettings,
    run=run_syntax_heads, charts="core.charts.heads_dataset:syntax_charts", title="Heads over a dataset: syntactic heads",
    summary="the best head per dependency relation on a CoNLL-U treebank", order=23,
)
ANALYSES = (SURVEY, CHANGE, SYNTAX)

__all__ = [
    "ANALYSES", "CHANGE", "ChangeSettings", "PROTOCOL_HELP", "SURVEY", "SYNTAX", "SurveySettings", "SyntaxSettings",
    "run_attention_change", "run_survey", "run_syntax_heads",
    "AttentionChange", "BLOCK", "CLARK_MAX_TOKENS", "CLARK_OFFSETS", "CLARK_POSSESSIVES", "CLARK_PUNCTUATION",
    "DIAGONAL", "DIRECTIONS", "HeadSurvey", "MIXED_EACH", "MIXED_TOTAL", "PAIR_DIRECTIONS",
    "PAIR_DIRECTION_TITLES", "PAIR_LABELS", "PAIR_MEASURES", "PATTERNS", "POSS_RELATIONS", "PROTOCOLS",
    "PairAttention", "PairHeads", "PatternExample", "STAT_NAMES", "STAT_TITLES", "SyntaxHeads", "SyntaxTally",
    "TokenRoles", "VERTICAL", "attention_change", "attention_cosine", "auc_by_label", "change_ranks",
    "check_attention", "clark_hits", "clark_offset_guess", "classify_patterns", "example_patterns",
    "example_stats", "head_label", "labelled_pairs", "last_layers_change_most", "layer_change", "mrpc_pairs",
    "pair_attention", "pair_example", "pair_heads", "pair_shares", "pattern_features", "predicted_heads",
    "predicted_heads_reverse", "roles_of", "survey_heads", "syntax_heads", "token_roles",
]
