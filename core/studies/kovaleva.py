"""Kovaleva et al. (2019), "Revealing the Dark Secrets of BERT", section 4.3 / Figure 5: after fine-tuning, which
layers' attention changed most? Per head, the cosine between the pretrained and the fine-tuned model's flattened
attention maps on the same input, averaged over the task's dev set (core.analyses.heads.attention_change); the paper's
claim is that the last two layers change most (core.analyses.heads.last_layers_change_most).

A fine-tuned model is needed and none ships with BERT Lens: give a run with `--set finetuned=RUN` (a run name under
models_cache/runs, or a model folder); the pretrained model is `--model`, else the model the run was trained
from (its recipe.json), else bert-base-uncased.
"""

from __future__ import annotations

import json
from pathlib import Path

from core import references, studies
from core.analyses.head_features import TOKEN_TYPES, cls_attention
from core.analyses.heads import attention_change, change_ranks, last_layers_change_most, layer_change
from core.data import corpus as corpora
from core.model.loading import load_model, resolve

PAPER_MODEL = "bert-base-uncased"
DEFAULT_CORPUS = "mrpc:validation:all"
PROTOCOL = "bertlens"  # Kovaleva's measure is the one core.analyses.heads.attention_change computes; no separate protocol

NEEDS_RUN = ("The kovaleva study compares a fine-tuned model with the model it was trained from, and none was "
             "given: pass the fine-tuned run as the study option 'finetuned' (CLI: python -m core reproduce "
             "kovaleva --set finetuned=RUN, RUN a name under models_cache/runs or a model folder). Train one on the "
             "Fine-tuning page or with python -m core finetune (the paper fine-tuned bert-base-uncased on GLUE "
             "tasks; MRPC is the local one).")


def base_model_of(ref: str) -> str | None:
    """The model a run was trained from (its recipe.json), when `ref` is a run or a run's folder."""
    try:
        _, folder = resolve(ref)
        recipe = Path(folder) / "recipe.json" if folder else None
        return json.loads(recipe.read_text()).get("model") if recipe and recipe.is_file() else None
    except Exception:  # not a run, or an unreadable recipe: the caller falls back to the paper's model
        return None


def run(options: studies.StudyOptions, progress=None, should_stop=None) -> studies.StudyResult:
    finetuned = options.extra.get("finetuned")
    if not finetuned or not isinstance(finetuned, str):
        raise ValueError(NEEDS_RUN)
    pretrained = options.model or base_model_of(finetuned) or PAPER_MODEL
    spec = options.corpus or DEFAULT_CORPUS
    inputs = corpora.resolve(spec, options.seed, limit=options.limit).take(options.limit).inputs
    lm_a, lm_b = load_model(pretrained), load_model(finetuned)
    change = attention_change(lm_a, lm_b, inputs, progress=progress, should_stop=should_stop)
    cosine = {layer + 1: float(v) for layer, v in enumerate(change.cosine.mean(axis=1))}
    moved = {layer + 1: float(v) for layer, v in enumerate(layer_change(change.cosine))}
    ranks = {layer + 1: float(v) for layer, v in enumerate(change_ranks(change.cosine))}
    holds = last_layers_change_most(change.cosine, 2)
    claim = {"claim": 1.0 if holds else 0.0}
    comparison = references.compare(references.KOVALEVA_LAST_TWO, claim, lm_a.ref, PROTOCOL)
    # Fig. 7 on the fine-tuned model: the last layer's [CLS] row by token type, over the same inputs.
    cls = cls_attention(lm_b, inputs, should_stop=should_stop)
    shares = {t: float(cls.shares[k].mean()) for k, t in enumerate(TOKEN_TYPES)}
    sep_claim = {"claim": 1.0 if max(shares, key=shares.get) == "sep" else 0.0}
    cls_comparison = references.compare(references.KOVALEVA_CLS_SEP, sep_claim, lm_a.ref, PROTOCOL)
    most = sorted(ranks, key=ranks.get)[:2]
    unchanged = float(max(moved.values())) < 1e-6
    notes = (
        f"Pretrained {lm_a.ref} vs fine-tuned {lm_b.ref} on {change.n_examples} inputs of {spec}; "
        f"{change.layers} layers compared (layer k = the attention of transformer layer k).",
        "The two models' attention maps are identical: nothing changed, so the claim cannot hold (was the "
        "fine-tuned model really trained?)." if unchanged else
        f"The two layers that changed most: {most[0]} and {most[1]} of {change.layers} — the claim "
        + ("holds." if holds else "does not hold."),
        "The paper averaged over the dev set of the task each model was fine-tuned on: use the run's own task "
        "as the corpus (mrpc for an MRPC run, snli for an SNLI run).",
        f"Figure 7 on {lm_b.ref}: the last layer's [CLS] row puts " + ", ".join(f"{v:.2f} on {t}" for t, v in
        shares.items()) + " (mean over heads and inputs).",
    )
    return studies.StudyResult(
        study="kovaleva", model=lm_a.ref, corpus=spec, protocol=PROTOCOL, comparisons=(comparison, cls_comparison),
        measured={"mean cosine per layer (pretrained vs fine-tuned)": cosine, "change per layer (1 - cosine)": moved,
                  "change rank (1 = changed most)": ranks, "last two layers change most": claim,
                  "fine-tuned last-layer [CLS] row by token type (mean over heads)": shares,
                  "last-layer [CLS] attends most to [SEP]": sep_claim},
        notes=notes, degenerate=studies.degeneracy_of(finetuned),
    )


STUDY = studies.Study(
    name="kovaleva", title="Kovaleva et al. (2019), Revealing the Dark Secrets of BERT (section 4.3, Figures 5 and 7)",
    model=PAPER_MODEL + " and its fine-tuned copies", data="GLUE dev sets (MRPC, STS-B, SST-2, QQP, RTE, QNLI, MNLI)",
    stand_in=None, default_corpus=DEFAULT_CORPUS, protocol=PROTOCOL,
    cost_cpu="MiniLM-L6 vs a copy: 76 s measured (two passes over 408 MRPC dev pairs, 2 shared cores); "
             "bert-base-uncased: about 8 min (estimated, ~8x the MiniLM's compute)",
    cost_gpu="under 40 s for bert-base-uncased (estimated)",
    summary="Checks the claim that fine-tuning changes the last two layers' attention most: per-layer mean cosine "
            "between the pretrained and a fine-tuned model's maps (needs a fine-tuned run: --set finetuned=RUN); and "
            "Figure 7's claim that the fine-tuned model's last-layer [CLS] attends most to [SEP].",
    run=run,
)
