"""bertviz on MRPC (reference 004, "Visualizing BERT attention"): the report looked at bert-base-uncased on two
MRPC pairs with bertviz's model view and its "Sentence A -> Sentence B" filter, and stated two things that can be
measured over many pairs:

1. equivalent (paraphrase) pairs show more attention from a word of A to the same word in B than non-equivalent
   pairs ("there are more of these connections");
2. A -> B attention gets stronger as the layer number increases.

Both are measured on raw token-level attention, exactly what bertviz draws (core.analyses.heads.pair_attention): A's word
pieces as queries, B's slice (B's pieces and the final [SEP]) as keys, nothing renormalised. The report also names
layer 4, head 3 (bertviz counts from 0) as one mapping equivalent words; its rank is reported, not judged.

The report's own two pairs (core.data.examples.MRPC_REPORT_PAIRS: rovers, not equivalent; Compaq, equivalent) are
measured as well, each on its own: both are in MRPC *train*, while the study's default corpus is the validation
split; options.extra["split"] ("train", "validation" or "test"; `--set split=train`) runs all of that split.

A second pass (core.analyses.heads.pair_heads) splits each head's A→B and B→A attention share by gold label and reports the
heads whose share separates paraphrases from non-paraphrases most (AUC); the report gives no numbers for this, so
it is measured and shown, not compared.
"""

from __future__ import annotations

import numpy as np

from core import numbering, references, studies
from core.analyses.heads import PAIR_DIRECTION_TITLES, PAIR_LABELS, labelled_pairs, pair_attention, pair_heads
from core.data import corpus as corpora
from core.data.examples import MRPC_REPORT_PAIRS
from core.model.loading import load_model

PAPER_MODEL = "bert-base-uncased"
DEFAULT_CORPUS = "mrpc:validation:all"
PROTOCOL = "bertlens"
GROUPS = PAIR_LABELS
NAMED_HEAD = (4, 3)  # "layer 4, head 3" in bertviz's 0-based labels = BERT Lens's attention index [4, 3]


def spearman(x, y) -> float:
    """Spearman's rank correlation (ranks by argsort; ties are not expected in real attention means)."""
    rx = np.argsort(np.argsort(x)).astype(float)
    ry = np.argsort(np.argsort(y)).astype(float)
    if rx.std() == 0 or ry.std() == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


def corpus_spec(options: studies.StudyOptions) -> str:
    """options.corpus, or the MRPC split options.extra["split"] names (all its pairs), or DEFAULT_CORPUS."""
    split = (options.extra or {}).get("split")
    if split is None:
        return options.corpus or DEFAULT_CORPUS
    if split not in corpora.DATASET_SPLITS["mrpc"]:
        raise ValueError(f"split '{split}' is not an MRPC split; choose one of: {', '.join(corpora.DATASET_SPLITS['mrpc'])}")
    if options.corpus:
        raise ValueError(f"give a corpus ('{options.corpus}') or a split ('{split}'), not both")
    return f"mrpc:{split}:all"


def report_pairs(lm, should_stop=None) -> tuple[dict, list[str]]:
    """The report's two pairs, each its own group: A→B and A→same word per layer, and where they sit in MRPC."""
    labels = list(MRPC_REPORT_PAIRS)
    result = pair_attention(lm, [p[:2] for p in MRPC_REPORT_PAIRS.values()], labels, should_stop=should_stop)
    measured: dict[str, dict] = {}
    for g, label in enumerate(labels):
        name = label.removeprefix("MRPC report pair: ")
        measured[f"report pair {name}: A→B attention per layer"] = {
            layer + 1: float(v) for layer, v in enumerate(result.measures[g, 0].mean(axis=1))}
        measured[f"report pair {name}: A→same word in B per layer"] = {
            layer + 1: float(v) for layer, v in enumerate(result.measures[g, 2].mean(axis=1))}
    twin = result.measures[:, 2].mean(axis=(1, 2))
    measured["report pairs"] = {f"twin attention, {label.removeprefix('MRPC report pair: ')}": float(t)
                                for label, t in zip(labels, twin)}
    eq = next(g for g, p in enumerate(MRPC_REPORT_PAIRS.values()) if p[3] == "1")
    measured["report pairs"]["equivalent pair has more twin attention (1 = yes)"] = float(twin[eq] == twin.max())
    ids = "; ".join(f"{label.removeprefix('MRPC report pair: ')} = MRPC train {i1}/{i2} (label {gold})"
                    for label, (_, _, (i1, i2), gold) in MRPC_REPORT_PAIRS.items())
    return measured, [f"The report's own pairs, measured alone: {ids}; both are in MRPC train, not validation."]


def run(options: studies.StudyOptions, progress=None, should_stop=None) -> studies.StudyResult:
    spec = corpus_spec(options)
    corpus = corpora.resolve(spec, options.seed, limit=options.limit).take(options.limit)
    pairs, groups = labelled_pairs(corpus)
    missing = [g for g in GROUPS if g not in groups]
    if missing:
        raise ValueError(f"{corpus.name} has no {' and no '.join(missing)} pairs among {len(pairs)}: the study "
                         "compares both kinds; give MRPC (mrpc[:SPLIT[:N]]) or another labelled pair corpus.")
    lm = load_model(options.model or PAPER_MODEL)
    result = pair_attention(lm, pairs, groups, progress=studies.half_progress(progress, 0), should_stop=should_stop)
    by_label = pair_heads(lm, pairs, groups, GROUPS, corpus=spec, progress=studies.half_progress(progress, 1), should_stop=should_stop)
    eq, neq = (result.groups.index(g) for g in GROUPS)
    twin = result.measures[:, 2]  # [G, L, H]
    to_b = result.measures[:, 0]
    weights = result.n_pairs / result.n_pairs.sum()
    to_b_all = np.tensordot(weights, to_b, axes=1)  # [L, H], over all pairs
    to_sep_all = np.tensordot(weights, result.measures[:, 1], axes=1)
    layers = to_b.shape[1]

    def per_layer(values):
        return {layer + 1: float(v) for layer, v in enumerate(values.mean(axis=1))}

    twin_claim = float(twin[eq].mean() > twin[neq].mean())
    rho = spearman(np.arange(layers), to_b_all.mean(axis=1))
    deeper_claim = float(rho > 0)
    comparisons = (
        references.compare(references.BERTVIZ_TWIN, {"claim": twin_claim}, lm.ref, PROTOCOL),
        references.compare(references.BERTVIZ_DEEPER, {"claim": deeper_claim}, lm.ref, PROTOCOL),
    )
    measured = {
        "A→B attention per layer": per_layer(to_b_all),
        "A→final [SEP] per layer": per_layer(to_sep_all),
        "A→same word in B per layer, equivalent": per_layer(twin[eq]),
        "A→same word in B per layer, not equivalent": per_layer(twin[neq]),
        "summary": {"twin attention, equivalent": float(twin[eq].mean()),
                    "twin attention, not equivalent": float(twin[neq].mean()),
                    "share of A pieces with a twin, equivalent": float(result.twin_share[eq]),
                    "share of A pieces with a twin, not equivalent": float(result.twin_share[neq]),
                    "spearman(layer, A→B)": rho},
    }
    notes = [
        f"{int(result.n_pairs[eq])} equivalent and {int(result.n_pairs[neq])} non-equivalent pairs of {spec} "
        "(the report viewed one of each).",
        "Twin attention = mass from a piece of A to the same piece string in B, averaged over A's pieces (0 where "
        "there is none), so it grows with word overlap as well as with how strongly twins are attended: "
        f"{result.twin_share[eq]:.0%} of A's pieces have a twin in equivalent pairs, {result.twin_share[neq]:.0%} "
        "in the others.",
        f"A→B per layer rank-correlates with depth at rho = {rho:+.2f}.",
    ]
    measured["A→B / B→A share by gold label (mean over heads)"] = {
        f"{PAIR_DIRECTION_TITLES[d]}, {label}": float(np.nanmean(by_label.mean[g, i]))
        for i, d in enumerate(("a_to_b", "b_to_a")) for g, label in enumerate(GROUPS)}
    top = by_label.top_heads(5)
    measured["heads that separate the labels most (AUC, equivalent > not equivalent)"] = {
        f"{PAIR_DIRECTION_TITLES[c['direction']]} {numbering.head_name(c['layer'], c['head'])}": c["auc"] for c in top}
    if top:
        best = top[0]
        notes.append(f"Most separating head: {PAIR_DIRECTION_TITLES[best['direction']]} share of layer "
                     f"{numbering.shown(best['layer'])}, head {best['head']} (layers from 1, heads from 0), AUC {best['auc']:.2f} (0.5 = no difference): its mean share is "
                     f"{best['mean equivalent']:.3f} on equivalent pairs and {best['mean not equivalent']:.3f} on the "
                     "others. The Attention page's 'Paraphrase heads' section opens any pair in the head view.")
    layer, head = NAMED_HEAD
    head_ranks = ()
    if layer < by_label.auc.shape[1] and head < by_label.auc.shape[2]:
        measured["summary"]["AUC of bertviz's layer 4 head 3, A→B share"] = float(by_label.auc[0, layer, head])
    if layer < twin.shape[1] and head < twin.shape[2]:
        score = twin[eq]
        rank = int((score > score[layer, head]).sum()) + 1
        measured["summary"]["rank of bertviz's layer 4 head 3 by twin attention (equivalent pairs)"] = float(rank)
        head_ranks = (studies.HeadRank("links paraphrase words (twin attention, equivalent pairs)", f"{layer}-{head}",
                                       rank, int(score.size)),)
        notes.append(f"The report's 'layer 4, head 3' (bertviz, from 0; L{numbering.shown(layer)} H{head} on "
                     f"BERT Lens's charts) ranks {rank} of "
                     f"{score.size} heads by twin attention on equivalent pairs.")
    report_measured, report_notes = report_pairs(lm, should_stop)
    measured.update(report_measured)
    notes.extend(report_notes)
    return studies.StudyResult(
        study="bertviz-mrpc", model=lm.ref, corpus=spec, protocol=PROTOCOL, comparisons=comparisons,
        measured=measured, notes=tuple(notes), heads=head_ranks,
    )


STUDY = studies.Study(
    name="bertviz-mrpc", title="Visualizing BERT attention with bertviz on MRPC (reference 004)",
    model=PAPER_MODEL, data="MRPC sentence pairs (two viewed in the report)", stand_in=None,
    default_corpus=DEFAULT_CORPUS, protocol=PROTOCOL,
    cost_cpu="MiniLM-L6: 33 s measured for the first of its two passes (408 MRPC dev pairs, 2 shared cores), so "
             "about 70 s for both (estimated); bert-base-uncased: about 8 min (estimated, ~8x the MiniLM's compute)",
    cost_gpu="under 40 s for bert-base-uncased (estimated, two passes)",
    summary="Checks the report's two statements with bertviz's Sentence A -> Sentence B slice on MRPC dev pairs: "
            "equivalent pairs put more attention from a word of A on the same word in B than non-equivalent pairs, "
            "and A -> B attention grows with the layer (Spearman over layers > 0). Raw token attention, as bertviz. "
            "Also lists the heads whose A -> B / B -> A share separates paraphrases from the rest most (AUC), and "
            "measures the report's own two pairs (rovers, Compaq: MRPC train; --set split=train runs that split).",
    run=run,
)
