"""Protocols: a named, documented way of computing an analysis.

Each analysis offers BERT Lens's own readable default ("bertlens": whole words, punctuation kept where it helps a
reader) and, where a paper defines one, the paper's protocol. Every result carries the name of the protocol it
was computed with, and every chart prints it, so a number is never drawn beside a paper's without saying whether
it was computed the paper's way. The CLI flag is `--protocol NAME`; pages show a "paper protocol" switch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Protocol:
    """name: the CLI value; paper: who defined it; summary: what it changes, in one or two plain sentences."""

    name: str
    paper: str
    summary: str


DEFAULT = "bertlens"

PROTOCOLS: dict[str, Protocol] = {
    p.name: p
    for p in (
        Protocol(DEFAULT, "BERT Lens", "Readable units: whole words (word pieces averaged), as labelled on each chart."),
        Protocol("ethayarajh", "Ethayarajh (2019), kawine/contextual",
                 "WordPiece tokens without [CLS]/[SEP]; self-similarity and MEV over token types with at least 5 "
                 "occurrences (punctuation excluded, every occurrence), at most 1,000 sampled ordered pairs per "
                 "word; baseline and intra-sentence from 1,000 sampled sentences, one token each for the baseline "
                 "(punctuation kept there, as in his vectors)."),
        Protocol("clark", "Clark et al. (2019), clarkkev/attention-analysis",
                 "Syntactic heads scored in both directions (the better kept), roots count as misses, offset "
                 "baseline -3..+2; punctuation means periods and commas; layers and heads numbered from 1."),
        Protocol("hewitt-manning", "Hewitt & Manning (2019), john-hewitt/structural-probes",
                 "Distance probe of full rank (the hidden size) on word vectors (pieces averaged), at most 40 "
                 "epochs, early stop after 5 without gain; UUAS leaves out the PTB punctuation tags '' , . : `` "
                 "-LRB- -RRB- (XPOS); DSpr averaged per sentence length, then over lengths 5-50."),
        Protocol("merchant", "Merchant et al. (2020)",
                 "RSA per layer between a pre-trained and a fine-tuned model on a seeded random sample of words "
                 "(each read in its sentence): cosine similarity of every two words within each model, then the "
                 "Pearson correlation of the two models' similarity matrices, layer l against layer l."),
        Protocol("visbert", "van Aken et al. (2019), VisBERT",
                 "A new PCA fitted per layer on the one input's token vectors."),
        Protocol("slides", "CS4650 slides (Ge & Zhu)",
                 "As the course slides: AdamW lr 5e-5, eps 1e-8, no weight decay, 2 epochs, batch 32, no schedule or "
                 "clipping (not stated), test split; bias filter is a case-sensitive whole-token match on the premise."),
        Protocol("edge-probing", "Tenney et al. (2019), BERT rediscovers the classical NLP pipeline",
                 "Edge probes trained on a learnt scalar mix of layers 0..l for every l; the expected layer weighs "
                 "each layer's gain in the mix's score by its number. BERT Lens probes one layer at a time (the "
                 "best score up to l stands in for the mix), so only the order of tasks compares."),
        Protocol("gao", "Gao et al. (2021), SimCSE",
                 "Unsupervised SimCSE: MLP over [CLS] in training only, lr 3e-5, batch 64, length 32, 1 epoch, "
                 "temperature 0.05, linear learning-rate decay."),
    )
}


def check(name: str, allowed: tuple[str, ...]) -> str:
    """name if it is one of `allowed`, else a ValueError listing them (shown as-is on the CLI and pages)."""
    if name not in allowed:
        raise ValueError(f"Unknown protocol '{name}' here; choose one of: {', '.join(allowed)}.")
    return name


def describe(name: str) -> str:
    """One line for a chart caption: 'Protocol: <paper> — <summary>'."""
    p = PROTOCOLS[name]
    return f"Protocol: {p.paper}. {p.summary}"
