"""Clark et al. (2019), "What Does BERT Look At?": where BERT's attention goes layer by layer ([CLS], [SEP],
periods and commas; Figure 2) and which single head finds each dependency relation best, against a fixed-offset
baseline (Table 1), computed with his protocol (core.analyses.heads, protocol "clark").

The paper: bert-base-uncased; Figure 2 on Wikipedia ("[CLS] A [SEP] B [SEP]", two consecutive spans, at most 128
pieces); Table 1 on WSJ Penn Treebank dev with Stanford Dependencies. Neither is offline: the stand-in is UD English
EWT dev. Its sentences feed the syntax part one by one (as his [CLS] words [SEP]) and, two consecutive items at a
time, the attention part as "[CLS] A [SEP] B [SEP]" inputs cut at 128 pieces. UD relations are renamed to their
Stanford Dependencies names (UD_TO_SD) before scoring, so the rows line up with Table 1.
"""

from __future__ import annotations

from dataclasses import replace

from core import references, studies
from core.analyses.head_clustering import head_map, layer_closeness
from core.analyses.heads import survey_heads, syntax_heads
from core.data import corpus as corpora
from core.model.loading import load_model
from core.progress import check_stop

PAPER_MODEL = "bert-base-uncased"
DEFAULT_CORPUS = "ud:dev:500"
PROTOCOL = "clark"
MAX_TOKENS = 128  # preprocess_unlabeled.py / extract_attention.py --max_sequence_length default

# UD v2 relation -> the Stanford Dependencies relation annotated the same way (head and dependent alike). UD
# relations missing here keep their name and have no row in Table 1 (case, obl, nmod, cc, conj, ...).
UD_TO_SD = {
    "det": "det", "nsubj": "nsubj", "amod": "amod", "advmod": "advmod", "aux": "aux", "ccomp": "ccomp",
    "xcomp": "xcomp", "mark": "mark", "cop": "cop", "advcl": "advcl", "appos": "appos",
    "obj": "dobj", "nummod": "num", "compound": "nn", "nmod:poss": "poss", "nsubj:pass": "nsubjpass",
    "aux:pass": "auxpass", "compound:prt": "prt", "acl:relcl": "rcmod", "obl:tmod": "tmod", "nmod:tmod": "tmod",
    "obl:npmod": "npadvmod", "nmod:npmod": "npadvmod",
}

LAYER_MEASURES = (("cls", references.CLARK_CLS), ("sep", references.CLARK_SEP), ("punct", references.CLARK_PUNCT))


def to_stanford(sentence):
    """A core.data.treebank.Sentence with its UD relations renamed by UD_TO_SD (others unchanged)."""
    return replace(sentence, deprels=tuple(UD_TO_SD.get(r, r) for r in sentence.deprels))


def segment_pairs(items) -> list:
    """Two-segment inputs as Clark's Wikipedia ones: consecutive sentences paired (0, 1), (2, 3), ...; pairs in
    the corpus are kept as they are; an odd last sentence is dropped."""
    singles = [i for i in items if isinstance(i, str)]
    pairs = [tuple(i) for i in items if not isinstance(i, str)]
    return pairs + [(singles[k], singles[k + 1]) for k in range(0, len(singles) - 1, 2)]


def run(options: studies.StudyOptions, progress=None, should_stop=None) -> studies.StudyResult:
    spec = options.corpus or DEFAULT_CORPUS
    corpus = corpora.resolve(spec, options.seed, limit=options.limit).take(options.limit)
    lm = load_model(options.model or PAPER_MODEL)
    inputs = segment_pairs(corpus.items)
    trees = [to_stanford(t) for t in corpus.trees]
    if not inputs:
        raise ValueError(f"{corpus.name}: the attention part needs at least two sentences (or one pair).")
    total = len(inputs) + len(trees)

    def part(offset):
        return None if progress is None else (lambda done, _n: progress(offset + done, total))

    survey = survey_heads(lm, inputs, max_length=min(MAX_TOKENS, lm.max_length), protocol=PROTOCOL,
                          progress=part(0), should_stop=should_stop)
    check_stop(should_stop)
    measured: dict[str, dict] = {}
    comparisons = []
    for name, ref in LAYER_MEASURES:
        series = {layer + 1: float(v) for layer, v in enumerate(survey.layer_means(name))}
        measured[ref.measure] = series
        comparisons.append(references.compare(ref, series, lm.ref, PROTOCOL, lm.num_layers))
    notes = [
        f"Stand-in data: {corpus.name} instead of Wikipedia (Figure 2) and WSJ Penn Treebank dev with Stanford "
        "Dependencies (Table 1), so the numbers are indicative.",
        f"Attention part: {survey.n_examples} inputs '[CLS] A [SEP] B [SEP]' of two neighbouring items of the sample "
        f"(consecutive sentences only when the whole split is used), cut at {MAX_TOKENS} pieces "
        f"({survey.n_truncated} were cut); punctuation = '.' and ',' tokens.",
        "Figure 2's values were read off the image his notebook stored (tolerance 0.05).",
    ]
    n_map = int(options.extra.get("head_map") or 0)
    if n_map:
        # Section 6, opt-in (the distances cost L·H passes over every map): heads of one layer lie close?
        hm = head_map(lm, inputs[:n_map], should_stop=should_stop)
        within, across = layer_closeness(hm.distances, hm.n_heads)
        measured["mean JS distance between heads"] = {"same layer": within, "different layers": across}
        claim = {"claim": 1.0 if within < across else 0.0}
        measured["heads of one layer are closer"] = claim
        comparisons.append(references.compare(references.CLARK_HEAD_LAYERS, claim, lm.ref, PROTOCOL))
        notes.append(f"Head map (section 6) on {hm.n_examples} inputs: mean Jensen-Shannon distance {within:.3f} "
                     f"within a layer vs {across:.3f} across layers.")
    if trees:
        syntax = syntax_heads(lm, trees, protocol=PROTOCOL, progress=part(len(inputs)), should_stop=should_stop)
        rows = {name: r for r, name in enumerate(syntax.relations)}
        best = {name: float(syntax.best_accuracy[r]) for name, r in rows.items()}
        base = {name: float(syntax.baseline_accuracy[r]) for name, r in rows.items()}
        measured["best head accuracy per relation"] = best
        measured["fixed-offset baseline per relation"] = base
        measured["dependents per relation"] = {name: float(syntax.counts[r]) for name, r in rows.items()}
        comparisons.append(references.compare(references.CLARK_SYNTAX, best, lm.ref, PROTOCOL))
        comparisons.append(references.compare(references.CLARK_BASELINE, base, lm.ref, PROTOCOL))
        shown = [name for name in references.CLARK_SYNTAX.values if name in rows]
        ranked = (_paper_head_rank(syntax.accuracy[rows[name]], name) for name in shown)
        head_ranks = tuple(h for h in ranked if h is not None)
        notes.append("Best heads measured (layer-head from 1, paper's in brackets): " + ", ".join(
            f"{name} {syntax.label(rows[name])} [{references.CLARK_BEST_HEADS[name]}]" for name in shown) + ".")
        notes.append(f"Syntax part: {syntax.n_sentences} sentences ({syntax.n_skipped} over {MAX_TOKENS} pieces "
                     "skipped); UD relations renamed to Stanford Dependencies (obj->dobj, nmod:poss->poss, "
                     "compound->nn, ...); conventions still differ in detail (infinitival 'to' is aux in SD, mark "
                     "in UD). Relations under 100 dependents are noisy.")
        if "all" in rows:
            notes.append(f"All words (roots as misses): best head {syntax.label(rows['all'])} "
                         f"{best['all']:.3f}, baseline {base['all']:.3f} (paper, other conventions: 0.347 and 0.267).")
    else:
        head_ranks = ()
        notes.append(f"{corpus.name} has no dependency trees: the Table 1 part was not run (give ud[:SPLIT[:N]]).")
    return studies.StudyResult(
        study="clark", model=lm.ref, corpus=spec, protocol=PROTOCOL, comparisons=tuple(comparisons),
        measured=measured, notes=tuple(notes), heads=head_ranks,
    )


def _paper_head_rank(accuracy, relation: str) -> studies.HeadRank | None:
    """The rank (1 = best) of the head Table 1 names for `relation` among all heads, by accuracy [layer, head];
    None when the model has no such head."""
    layer, head = (int(n) - 1 for n in references.CLARK_BEST_HEADS[relation].split("-"))
    if layer >= accuracy.shape[0] or head >= accuracy.shape[1]:
        return None
    return studies.HeadRank(f"best head for {relation}", references.CLARK_BEST_HEADS[relation],
                            int((accuracy > accuracy[layer, head]).sum()) + 1, int(accuracy.size))


STUDY = studies.Study(
    name="clark", title="Clark et al. (2019), What Does BERT Look At? An Analysis of BERT's Attention",
    model=PAPER_MODEL,
    data="Wikipedia spans (Figure 2); WSJ Penn Treebank dev, Stanford Dependencies (Table 1)",
    stand_in="UD English EWT dev (sentences paired for Figure 2; relations renamed to Stanford Dependencies)",
    default_corpus=DEFAULT_CORPUS, protocol=PROTOCOL,
    cost_cpu="MiniLM-L6: 37 s measured (500 EWT sentences + 250 pairs, 2 shared cores); bert-base-uncased: about "
             "5 min (estimated, ~8x the MiniLM's compute)",
    cost_gpu="under 30 s for bert-base-uncased (estimated)",
    summary="Per layer, the attention mass on [CLS], [SEP] and on periods/commas (Figure 2, read off his figure), "
            "and per dependency relation the best head's accuracy (both directions, roots as misses, poss rule) "
            "beside the best fixed offset in -3..+2 (Table 1), on UD EWT as a stand-in for Wikipedia and the PTB; "
            "with --set head_map=N, section 6's claim that heads of one layer lie close (JS distances on N inputs).",
    run=run,
)
