"""Questions for the class built from what a view has just computed (issue 36): the right answer is always the
model's own (its top guess at a mask, the word a head attends to most, the direction of a measured curve, the layer
fine-tuning moved most), so a reveal can never disagree with the chart beside it.

Each builder is a pure function returning a `core.classroom.store.Question`. Choices are plain text, shown to
students only through core.safe_text (widget labels, the histogram's data); the builders cap their length and number.
"""

from __future__ import annotations

import math
import random
import re
import unicodedata
from typing import Callable, Sequence

import numpy as np

from core import numbering
from core.classroom.store import MAX_ANSWER_CHARS, MAX_CHOICES as MAX_GENERATED_CHOICES, Question
from core.model.encoding import pool_attention, word_units

# A typed question: what a phone shows as large buttons without scrolling far. A question built from a view (a
# sentence's words, a model's layers) may have up to the store's MAX_CHOICES.
MIN_CHOICES, MAX_CHOICES = 2, 8
MAX_PROMPT_CHARS, MAX_CHOICE_CHARS = 300, MAX_ANSWER_CHARS
DEFAULT_MASKED_CHOICES = 4
UP, DOWN = "Up", "Down"
_WORD = re.compile(r"\w", re.UNICODE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


class QuestionError(ValueError):
    """A question that cannot be asked: the message says what to change."""


def clean_text(text, what: str, limit: int) -> str:
    """One line of text, control characters and runs of spaces squeezed, 1..limit characters (NFC)."""
    cleaned = " ".join(_CONTROL.sub(" ", unicodedata.normalize("NFC", str(text))).split())
    if not cleaned:
        raise QuestionError(f"The {what} is empty: write something.")
    if len(cleaned) > limit:
        raise QuestionError(f"The {what} has {len(cleaned)} characters; keep it to {limit} at most.")
    return cleaned


def _unique(labels: Sequence[str]) -> tuple[str, ...]:
    """Labels made distinct for buttons and the histogram: a repeated word becomes "the (2)", "the (3)"."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return tuple(out)


# ---- masked words ------------------------------------------------------------------------------------------------


def wordpiece_text(tokens: Sequence[str]) -> str:
    """WordPiece tokens as text: "##" pieces joined to the piece before, no space before punctuation."""
    return re.sub(r" ([.,;:!?'])", r"\1", " ".join(tokens).replace(" ##", ""))


def masked_word_question(pred, *, mask: int = 0, n_choices: int = DEFAULT_MASKED_CHOICES, seed: int = 0,
                         free_text: bool = False, spell: Callable[[list[str]], str] = wordpiece_text,
                         page: str = "masked", params: dict | None = None) -> Question:
    """"Which word will fill the blank?" for mask `mask` of a core.analyses.masked.MaskedPredictions.

    The right answer is the model's own top-1 at that mask (pred.final_tokens). The distractors are the model's
    next guesses (ranks 2..K of its last layer: words that fit the sentence, so the question is not a giveaway),
    drawn with `seed` and shuffled with it; word pieces ("##s"), punctuation and repeats are skipped. Ask with a
    larger top_k than n_choices for a mix of close and far guesses. free_text: no choices, students type a word.
    spell: tokens -> text, the tokenizer's `convert_tokens_to_string` (RoBERTa writes "Ġbank"); default
    WordPiece's joining.
    """
    if not 0 <= mask < len(pred.positions):
        raise QuestionError(f"Mask {mask} does not exist; the sentence has masks 0..{len(pred.positions) - 1}.")
    correct = clean_text(spell([pred.final_tokens[mask]]).strip(), "model's guess", MAX_CHOICE_CHARS)
    sentence = _sentence_with_blank(pred, mask, spell)
    prompt = clean_text(f"Which word will the model put in the blank? “{sentence}”", "question", MAX_PROMPT_CHARS)
    if free_text:
        return Question(kind="masked", prompt=prompt, choices=(), free_text=True, correct=correct, page=page,
                        params=dict(params or {}))
    if not MIN_CHOICES <= n_choices <= MAX_CHOICES:
        raise QuestionError(f"Ask with {MIN_CHOICES} to {MAX_CHOICES} choices, not {n_choices}.")
    seen, others = {correct.lower()}, []
    for token in pred.top_tokens[mask][-1][1:]:  # the last layer shown is the model's own output
        word = spell([token]).strip()
        if token.startswith("##") or not _WORD.search(word) or word.lower() in seen or len(word) > MAX_CHOICE_CHARS:
            continue
        seen.add(word.lower())
        others.append(word)
    if len(others) < n_choices - 1:
        raise QuestionError(f"The model's top {pred.top_ids.shape[-1]} guesses hold only {len(others)} other whole "
                            f"words; ask for more guesses or fewer than {n_choices} choices.")
    rng = random.Random(seed)
    choices = [correct, *rng.sample(others, n_choices - 1)]
    rng.shuffle(choices)
    return Question(kind="masked", prompt=prompt, choices=tuple(choices), free_text=False, correct=correct,
                    page=page, params=dict(params or {}))


def _sentence_with_blank(pred, mask: int, spell) -> str:
    """The input as text with "___" at the asked mask and "…" at any other (special tokens left out)."""
    parts, run = [], []
    for i, token in enumerate(pred.tokens):
        if i in pred.positions:
            parts += [spell(run).strip(), "___" if i == pred.positions[mask] else "…"]
            run = []
        elif not re.fullmatch(r"\[[A-Z]+\]|<[a-z/]+>", token):
            run.append(token)
    parts.append(spell(run).strip())
    return re.sub(r" ([.,;:!?'])", r"\1", " ".join(p for p in parts if p))


# ---- attention ---------------------------------------------------------------------------------------------------


def word_labels(encoding) -> tuple[str, ...]:
    """The words the model read, in order, each once ("the", …, "the (2)"): the attention question's choices."""
    _, first_token = word_units(encoding.word_ids, False)
    return _unique([encoding.words[encoding.word_ids[t]] for t in first_token])


def attention_question(encoding, layer: int, head: int, word: int, *, attentions: np.ndarray | None = None,
                       page: str = "attention", params: dict | None = None) -> Question:
    """"Which word does ⟨word⟩ attend to most in layer L, head H?" The choices are the input's words (a repeated
    word numbered, more than MAX_GENERATED_CHOICES cut to the ones this head weighs most, kept in sentence order);
    the right answer is the argmax of the word-level attention, merged as the Attention page merges (Clark et al.:
    pieces summed as keys, averaged as queries; special tokens left out, which leaves the argmax over words as it is).
    attentions: [layer, head, query, key] weights the page draws instead of the raw ones (norm-weighted, rollout).
    """
    weights = encoding.attentions if attentions is None else attentions
    n_layers, n_heads = weights.shape[:2]
    if not 0 <= layer < n_layers:
        raise QuestionError(f"Layer {numbering.shown(layer)} does not exist; the model has layers 1..{n_layers}.")
    if not 0 <= head < n_heads:
        raise QuestionError(f"Head {head} does not exist; the model has heads 0..{n_heads - 1}.")
    merged, _ = pool_attention(weights[layer, head], encoding.word_ids)
    labels = word_labels(encoding)
    if len(labels) < MIN_CHOICES:
        raise QuestionError("The sentence needs at least two words for this question.")
    if not 0 <= word < len(labels):
        raise QuestionError(f"Word {word} is not in the model's input; it read words 0..{len(labels) - 1}.")
    row = merged[word]
    best = int(np.argmax(row))
    shown = np.arange(len(labels))
    if len(shown) > MAX_GENERATED_CHOICES:
        shown = np.sort(np.argsort(-row, kind="stable")[:MAX_GENERATED_CHOICES])
    prompt = clean_text(f"Which word does “{labels[word]}” attend to most in layer {numbering.shown(layer)}, head {head}?",
                        "question", MAX_PROMPT_CHARS)
    return Question(kind="attention", prompt=prompt, choices=tuple(labels[i] for i in shown), free_text=False,
                    correct=labels[best], page=page, params=dict(params or {}))


# ---- anisotropy and fine-tuning ----------------------------------------------------------------------------------


def direction_question(layers: Sequence[int], values: Sequence[float], what: str, *, page: str = "anisotropy",
                       params: dict | None = None) -> Question:
    """"Up or down with depth?" for a measured per-layer curve (e.g. LayerProfile.random_cosine): the right answer
    is the sign of the last measured layer minus the first (NaN layers skipped). `what` names the measure."""
    values = np.asarray(values, dtype=np.float64)
    layers = np.asarray(layers)
    finite = np.flatnonzero(np.isfinite(values))
    if len(finite) < 2:
        raise QuestionError(f"The {what} was measured at fewer than two layers: run the measure first.")
    first, last = finite[0], finite[-1]
    if values[last] == values[first]:
        raise QuestionError(f"The {what} is the same at layer {layers[first]} and layer {layers[last]}: "
                            "neither up nor down is right.")
    prompt = clean_text(f"From layer {layers[first]} to layer {layers[last]}, does the {what} go up or down?",
                        "question", MAX_PROMPT_CHARS)
    return Question(kind="direction", prompt=prompt, choices=(UP, DOWN), free_text=False,
                    correct=UP if values[last] > values[first] else DOWN, page=page, params=dict(params or {}))


def layer_label(layer: int) -> str:
    return "Embeddings (layer 0)" if layer == 0 else f"Layer {layer}"


def changed_layer_question(similarity, measure: str = "cka", *, page: str = "finetune",
                           params: dict | None = None) -> Question:
    """"Which layer changes most after fine-tuning?" from a core.analyses.similarity.Similarity of the base model
    (A) against the fine-tuned one (B): the layer whose `measure` ("cka" or "rsa") between the two is lowest.
    Choices are the layers (the embeddings included); more than MAX_GENERATED_CHOICES keep the last ones."""
    if measure not in ("cka", "rsa"):
        raise QuestionError(f"Unknown measure {measure!r}; use cka or rsa.")
    scores = np.asarray(getattr(similarity, measure), dtype=np.float64)
    layers = [int(layer) for layer in similarity.layers]
    finite = [i for i, s in enumerate(scores) if math.isfinite(s)]
    if len(finite) < MIN_CHOICES:
        raise QuestionError("The comparison has fewer than two layers with a score: compare the models first.")
    shown = finite[-MAX_GENERATED_CHOICES:]
    lowest = min(shown, key=lambda i: scores[i])
    prompt = clean_text(f"Which layer changes most after fine-tuning ({measure.upper()} of the model before and "
                        "after, per layer)?", "question", MAX_PROMPT_CHARS)
    return Question(kind="layer", prompt=prompt, choices=tuple(layer_label(layers[i]) for i in shown),
                    free_text=False, correct=layer_label(layers[lowest]), page=page, params=dict(params or {}))


# ---- the teacher's own question ----------------------------------------------------------------------------------


def typed_question(prompt: str, choices: Sequence[str], correct: str | None = None, *, page: str = "",
                   params: dict | None = None) -> Question:
    """A multiple-choice question the teacher typed: MIN_CHOICES..MAX_CHOICES distinct choices (blank lines
    ignored), each at most MAX_CHOICE_CHARS, the prompt at most MAX_PROMPT_CHARS; `correct` one of the choices, or
    None for a poll with no right answer. The text is kept as typed (one line each) and escaped where it is shown."""
    prompt = clean_text(prompt, "question", MAX_PROMPT_CHARS)
    given = [c for c in choices if str(c).strip()]
    if not MIN_CHOICES <= len(given) <= MAX_CHOICES:
        raise QuestionError(f"Give {MIN_CHOICES} to {MAX_CHOICES} choices, one per line; there are {len(given)}.")
    cleaned = [clean_text(c, f"choice {i + 1}", MAX_CHOICE_CHARS) for i, c in enumerate(given)]
    folded = [c.casefold() for c in cleaned]
    repeated = sorted({c for c, f in zip(cleaned, folded) if folded.count(f) > 1})
    if repeated:
        raise QuestionError(f"Each choice must differ; repeated: {', '.join(repeated)}.")
    right = None
    if correct is not None and str(correct).strip():
        right = clean_text(correct, "right answer", MAX_CHOICE_CHARS)
        if right not in cleaned:
            raise QuestionError("The right answer must be one of the choices.")
    return Question(kind="choice", prompt=prompt, choices=tuple(cleaned), free_text=False, correct=right,
                    page=page, params=dict(params or {}))
