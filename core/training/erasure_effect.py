"""What erasing a concept does to the rest of the model (issue 49; core.analyses.layer_knowledge.erasure fits the
eraser): the eraser applied to every token's hidden state at one layer's output, through core.model.adapter's hooks,
and the model run on. A masked-word model (its own head, or one fitted for it with fit-mlm-head): held-out masked
whole words' top-1 (fit-mlm-head's masking and scoring); a fine-tuned classification run: its accuracy on its own
evaluation set (rebuilt from its recipe). Each before, after, and after erasing a random subspace of the same rank.

Here in core.training because both measures read what training wrote (the masking of fit-mlm-head, a run's recipe);
core.analyses does not import core.training, so the declared run (`run_erase_measured`) lives here too.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from core.analyses.ablation import _max_length
from core.analyses.layer_knowledge.erasure import Eraser, erasing, random_eraser, run_erase
from core.model.adapter import ModelAdapter
from core.model.classifier import is_classifier_folder, load_classifier, predict_logits, text_features
from core.model.loading import available_models, display_name, load_model
from core.progress import ProgressCallback, StopCheck, check_stop
from core.training.mlm_head import encode_masked, whole_word_accuracy
from core.training.runs import run_eval_sample

EFFECT_BATCH = 32  # classification examples per forward pass

def run_erase_measured(lm, inputs, settings, progress: ProgressCallback = None, should_stop: StopCheck = None):
    """The declared `erase` run: erasure.run_erase with the effect measured here."""
    return run_erase(lm, inputs, settings, progress, should_stop, effect=measure_effect)


def masked_word_top1(mlm_lm, sentences: Sequence[str], index: int, eraser: Eraser | None, seed: int,
                     should_stop: StopCheck = None) -> tuple[float, int]:
    """(top-1, masked words): a seeded 15 % of each sentence's whole words masked (all [MASK]), the masked-word model
    run with layer `index`'s output erased (None: as it is), a word right when every piece's top guess is."""
    head = ModelAdapter.of(mlm_lm.masked_lm).mlm_head
    with erasing(mlm_lm.model, index, eraser) if eraser is not None else contextlib.nullcontext():
        vectors, labels, groups = encode_masked(mlm_lm, sentences, np.random.default_rng(seed), all_mask=True,
                                                should_stop=should_stop)
    if not groups:
        return 0.0, 0
    with torch.no_grad():
        predicted = torch.cat([head(chunk.to(mlm_lm.device)).argmax(-1).cpu()
                               for chunk in torch.split(vectors, 4096)]).numpy()
    return whole_word_accuracy(predicted, labels.numpy(), groups), len(groups)


def run_accuracy(clf, examples, index: int, eraser: Eraser | None, should_stop: StopCheck = None) -> float:
    """A classification run's accuracy on `examples` with layer `index`'s output erased (None: as it is)."""
    features = text_features(clf.tokenizer, [(e.text, e.text_b) for e in examples], _max_length(clf))
    with erasing(clf.model, index, eraser) if eraser is not None else contextlib.nullcontext():
        logits = predict_logits(clf, features, batch_size=EFFECT_BATCH, should_stop=should_stop)
    index_of = {label: i for i, label in enumerate(clf.labels)}
    truth = np.array([index_of[e.label] for e in examples])
    return float(np.mean(np.asarray(logits).argmax(-1) == truth))


def fitted_head_for(model: str) -> str | None:
    """The name of a masked-word head fitted for `model` on this computer (fit-mlm-head), or None."""
    names = {model, Path(model).name, display_name(model)}
    fitted = [e.name for e in available_models() if e.source == "fitted-head" and e.fitted_on in names]
    return fitted[0] if fitted else None


def no_head_message(model: str) -> str:
    return (f"'{Path(model).name}' has neither a masked-word (MLM) head nor a classifier head, so the effect of the "
            "erasure on the rest of the model cannot be measured. Fit a masked-word head with: python -m core "
            f"fit-mlm-head --model {model} --corpus snli --out NAME (erase then uses it), or erase in a fine-tuned "
            "classification run (python -m core finetune).")


def measure_effect(model: str, lm, eval_sentences: Sequence[str], index: int, eraser: Eraser, seed: int,
                   limit: int, progress: ProgressCallback = None, should_stop: StopCheck = None) -> dict:
    """The "effect" JSON: {"kind": "masked_word" | "classification", "before", "after", "random_control", "n", ...}
    or {"kind": "none", "message"} when the model has neither head (the message says how to get one)."""
    control = random_eraser(eraser, seed)
    if is_classifier_folder(Path(lm.path)):
        clf = load_classifier(model, device=lm.device)
        sample = run_eval_sample(clf, limit, seed)
        out = {"kind": "classification", "task": sample.task, "split": sample.eval_split}
        scores = []
        for step, chosen in enumerate((None, eraser, control)):
            check_stop(should_stop)
            scores.append(run_accuracy(clf, sample.examples, index, chosen, should_stop))
            if progress is not None:
                progress(step + 1, 3, "measuring the effect")
        return {**out, **dict(zip(("before", "after", "random_control"), scores)), "n": len(sample.examples)}
    head = None
    mlm = load_model(model, device=lm.device, masked_lm=True)
    if mlm.masked_lm is None:
        head = fitted_head_for(model)
        if head is None:
            return {"kind": "none", "message": no_head_message(model)}
        mlm = load_model(head, device=lm.device, masked_lm=True)
    sentences = list(eval_sentences)[:limit]
    scores, n = [], 0
    for step, chosen in enumerate((None, eraser, control)):
        check_stop(should_stop)
        score, n = masked_word_top1(mlm, sentences, index, chosen, seed, should_stop)
        scores.append(score)
        if progress is not None:
            progress(step + 1, 3, "measuring the effect")
    out = {"kind": "masked_word", **dict(zip(("before", "after", "random_control"), scores)), "n": n}
    return {**out, "head": head} if head else out
