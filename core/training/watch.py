"""Measuring a classifier while it is fine-tuned: the frames of its time-lapse (core.training.timelapse).

The engine's step loop calls `Watch.at(step)` before the first update and after every step; at the planned steps
the model is measured against the starting model with the code of the command-line twins, on the same sample:

- RSA and CKA per layer: core.analyses.similarity's `Reference` (the starting model encoded once), as
  `python -m core compare --a BASE --b RUN --corpus PROBE --seed S` (its first 500 sentences, 1,500 words);
- attention change per head: core.analyses.heads.change's `AttentionMaps` (the starting model's maps kept), as
  `python -m core attention-change --a BASE --b RUN --corpus PROBE --seed S` (its first 200 inputs);
- anisotropy per layer: mean cosine of seeded random pairs of words from different sentences of the word sample;
- loss and accuracy of the classifier on the probe pairs (their gold labels) or a seeded sample of the run's
  evaluation examples (below);
- UUAS per layer when the probe set has dependency trees, as `python -m core probe --corpus PROBE --seed S`.

A frame is ONE forward pass over its inputs (issue 47: three passes over the probe pairs made measuring half of
the training time): every probe input (attention-change's) is encoded once, through core.model.encoding with hidden
states, attentions and the encoder's whole output, and the three measures are read from that pass: the word vectors
(compare's seeded word sample; the hidden states pooled per word), the attention maps, and the classifier's logits
(its own head on the pass's pooled output) for the dev loss and accuracy. Which inputs, for each kind of probe set:

- pairs (the default, 100 seeded dev pairs of the task): the pairs, once. The word sample is drawn from the words of
  both sides of each pair, read in their pair as the classifier reads them (compare --corpus reads each sentence
  alone, so on a pair probe the RSA / CKA are the pairs' own); the dev scores are those pairs' gold labels
  (`probe_targets`: a probe `TASK:DEVSPLIT:N` of the task's own evaluation split), so no other dev sample is read.
- sentences (builtin, ud, a file): attention-change's inputs plus compare's sampled sentences not among them, each
  once (the RSA / CKA equal `compare --corpus PROBE` exactly); the dev scores then need the run's evaluation
  examples, a second, smaller pass (DEV_EXAMPLES) with the classifier (`predict_logits`), and a treebank's UUAS the
  structural probe's own pass.

Measuring runs in eval mode with eager attention (SDPA returns no maps), under a forked random state, so the
training that follows is the same as without a time-lapse; its seconds are left out of the run's training time.
Frame 0 is the starting model compared with itself: the reference's own vectors and maps, not a second pass.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F

from core.analyses.anisotropy.measures import random_pair_cosine
from core.analyses.heads.change import AttentionMaps
from core.analyses.probe import ProbeSettings, probe_data, probe_layers
from core.analyses.similarity import DEFAULT_MAX_WORDS, Reference, assembled, batch_word_rows, kept_rows, sample_inputs
from core.data import corpus as corpora
from core.data import datasets
from core.data.datasets import seeded_subset
from core.files import atomic_path
from core.model.classifier import Classifier, predict_logits, save_classifier, text_features
from core.model.encoding import encode_batches, tokenize
from core.model.loading import LoadedModel, checkpoint_folder
from core.progress import StopCheck
from core.training import timelapse as tl
from core.training.runs import RunFolder

# What the command-line twins read by default: compare --limit 500 --max-words 1500, attention-change --limit 200.
COMPARE_SENTENCES = 500
ATTENTION_INPUTS = 200
DEV_EXAMPLES = 100  # evaluation examples each frame's loss and accuracy are measured on when the probe set is not
# the task's labelled dev pairs (then they cost a pass of their own at every frame: bench/timelapse.py)
ANISOTROPY_PAIRS = 1000
FRAME_BATCH = 32  # inputs a frame encodes at once (compare's batch)
# The evaluation split a probe `TASK:SPLIT:N` must name for its pairs' gold labels to be the frame's dev scores.
_DEV_SPLITS = {"snli": ("dev",), "mrpc": ("validation", "dev")}


@dataclass(frozen=True)
class ProbeSet:
    """What every frame reads: `compare`'s sentences, `attention-change`'s inputs and `probe`'s trees of one
    corpus spec and seed."""

    spec: str
    seed: int
    sentences: tuple[str, ...]
    inputs: tuple
    trees: tuple | None

    @classmethod
    def of(cls, spec: str, seed: int) -> "ProbeSet":
        corpus = corpora.resolve(spec, seed)
        trees = tuple(corpus.trees) or None
        return cls(spec, seed, tuple(corpus.head(COMPARE_SENTENCES).sentences),
                   tuple(corpus.take(ATTENTION_INPUTS).inputs), trees)


class Watch:
    """The time-lapse of one classifier run: built before training (probe set and dev sample read), `begin(total)`
    plans the frames, then `at(step)` before the first update and after each step measures, writes and (when asked)
    saves a checkpoint at the planned steps; at step 0 it first encodes the starting model, kept for every frame."""

    def __init__(self, recipe, folder: RunFolder, model: Classifier, tokenizer, labels: tuple[str, ...],
                 eval_examples: list, label_index, max_length: int, device: str, should_stop: StopCheck = None):
        self.recipe, self.folder, self.model, self.tokenizer = recipe, folder, model, tokenizer
        self.labels, self.device, self.max_length, self.should_stop = labels, device, max_length, should_stop
        self.probe = ProbeSet.of(recipe.timelapse_corpus or tl.default_probe(recipe.task), recipe.seed)
        targets = probe_targets(recipe, self.probe, label_index)
        if targets is not None:  # the probe pairs are the dev sample: their logits come from the frame's one pass
            self.dev_features, self.dev_targets = None, targets
        else:
            dev = seeded_subset(list(eval_examples), DEV_EXAMPLES, recipe.seed)
            self.dev_features = text_features(tokenizer, [(e.text, e.text_b) for e in dev], max_length)
            self.dev_targets = np.array([label_index(e.label) for e in dev], dtype=np.int64)
        self.pad_id = tokenizer.pad_token_id or 0
        self.steps: tuple[int, ...] = ()
        self.writer: tl.TimelapseWriter | None = None
        self.reference: Reference | None = None
        self.maps: AttentionMaps | None = None
        self.plan: FramePlan | None = None

    def begin(self, total_steps: int) -> None:
        """Plan the frames (ValueError for more frames than steps) and write the empty time-lapse."""
        self.steps = tl.frame_steps(total_steps, self.recipe.timelapse)
        kept = tl.kept_checkpoints(self.steps, self.recipe.keep_checkpoints)
        self.writer = tl.TimelapseWriter(self.folder.path, tl.Timelapse(self.steps, self.probe.spec, self.probe.seed,
                                                                        dev_examples=len(self.dev_targets),
                                                                        checkpoints=kept))
        self.folder.log(f"time-lapse: {len(self.steps)} frames at steps {list(self.steps)} on {self.probe.spec}"
                        + (f", checkpoints kept at {list(kept)}" if kept else ""))

    def at(self, step: int, train_seconds: float) -> float:
        """Measure at `step` when it is planned; returns the seconds spent (0 otherwise)."""
        if step not in self.steps:
            return 0.0
        start = time.perf_counter()
        with torch.random.fork_rng(devices=[]), _eval_mode(self.model):
            frame = self._measure(step)
        seconds = time.perf_counter() - start
        frame = replace(frame, measure_seconds=seconds)
        timelapse = self.writer.add(frame, train_seconds)
        if step in timelapse.checkpoints:
            self._save_checkpoint(step)
        self.folder.log(f"time-lapse frame {len(timelapse.frames)}/{len(self.steps)} at step {step}: mean CKA "
                        f"{np.nanmean(frame.cka):.3f}, dev accuracy {frame.dev_accuracy:.3f}; measuring "
                        f"{timelapse.measure_seconds:.1f} s so far, training {train_seconds:.1f} s")
        return seconds

    def status(self) -> dict:
        """Fields for status.json: frames done and the measuring cost, for the page's progress text."""
        t = self.writer.timelapse if self.writer else None
        return {} if t is None else {"timelapse_frames": len(t.frames), "timelapse_total": len(t.steps),
                                     "timelapse_seconds": t.measure_seconds,
                                     "timelapse_message": self.message(t.train_seconds)}

    def message(self, train_seconds: float) -> str:
        """The job's progress text: frames done and what measuring cost against training."""
        t = self.writer.timelapse
        share = f" ({t.measure_seconds / train_seconds:.0%} of training)" if train_seconds > 0 else ""
        return (f"training; time-lapse {len(t.frames)}/{len(t.steps)} frames, measuring {t.measure_seconds:.1f} s"
                f"{share}")

    def summary(self) -> dict:
        """The run's metrics.json keys: "timelapse" {"steps", "frames"} (the CLI contract) and the measuring cost."""
        t = self.writer.timelapse
        return {"timelapse": {"steps": list(t.steps), "frames": len(t.frames)},
                "timelapse_seconds": {"measuring": t.measure_seconds, "training": t.train_seconds,
                                      "share": t.measure_share}}

    # ---- one frame ---------------------------------------------------------------------------------------------
    def _measure(self, step: int) -> tl.Frame:
        now = LoadedModel(ref=f"{self.recipe.run_name}@{step}", path=str(self.folder.path), source="training",
                          model=self.model.encoder, tokenizer=self.tokenizer, device=self.device)
        if self.plan is None:
            self.plan = FramePlan.of(now, self.probe, self.max_length, dev_in_pass=self.dev_features is None)
            if self.dev_features is None and not self.plan.dev_in_pass:
                # A probe pair longer than the run reads: its logits are the truncated input's, a pass of their own.
                self.dev_features = text_features(self.tokenizer, list(self.probe.inputs), self.max_length)
        measured = self.plan.measure(now, self.model, self.maps, self.should_stop)
        vectors = measured.vectors
        if self.reference is None:
            # Step 0: the starting model, encoded once and kept for every later frame; frame 0 compares it with
            # itself (the model is still the starting model) without encoding it a second time.
            plan = self.plan
            self.reference = Reference.of_vectors(now, plan.read, plan.keep, plan.skipped, vectors,
                                                  seed=self.probe.seed, should_stop=self.should_stop)
            self.maps = measured.maps
            change = self.maps.unchanged()
        else:
            change = self.maps.change_of(now.ref, measured.cosines)
        similarity = self.reference.versus(now.ref, vectors, self.should_stop)
        anisotropy = random_pair_cosine(vectors.vectors.transpose(1, 0, 2), vectors.sentence, ANISOTROPY_PAIRS,
                                        self.probe.seed).mean
        loss, accuracy = self._dev_scores(measured.logits)
        return tl.Frame(step, loss, accuracy, similarity.rsa, similarity.cka, anisotropy, change.cosine,
                        self._uuas(now))

    def _dev_scores(self, logits: np.ndarray | None = None) -> tuple[float, float]:
        """Loss and accuracy of the frame's logits of the probe pairs, or (when the pass had none) of the dev sample's
        own pass."""
        if logits is None:
            logits = predict_logits(self.model, self.dev_features, batch_size=2 * self.recipe.batch_size,
                                    pad_id=self.pad_id, device=self.device)
        return dev_scores(logits, self.dev_targets)

    def _uuas(self, now: LoadedModel) -> np.ndarray | None:
        if not self.probe.trees:
            return None
        data = probe_data(self.probe.trees, name=self.probe.spec, seed=self.probe.seed)
        settings = ProbeSettings.for_protocol("bertlens", now.hidden_size, seed=self.probe.seed)
        return np.asarray(probe_layers(now, data, None, settings, use_cache=False, should_stop=self.should_stop).uuas)

    def _save_checkpoint(self, step: int) -> None:
        """The whole classifier at `step`, a complete run folder of its own under checkpoints/, written atomically."""
        target = checkpoint_folder(self.folder.path, step)
        target.parent.mkdir(exist_ok=True)
        with atomic_path(target) as tmp:
            save_classifier(self.model, self.tokenizer, tmp, self.labels,
                            extra={"task": self.recipe.task, "max_length": self.max_length, "step": step})


def dev_scores(logits: np.ndarray, targets: np.ndarray) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of logits [n, classes] against the gold label indices [n]."""
    logits = torch.as_tensor(np.asarray(logits, dtype=np.float32))
    targets = torch.as_tensor(targets)
    return float(F.cross_entropy(logits, targets)), float((logits.argmax(-1) == targets).float().mean())


def probe_targets(recipe, probe: ProbeSet, label_index) -> np.ndarray | None:
    """The gold label indices of the probe's pairs when the probe is `TASK:SPLIT:N` of the run's own task and
    evaluation split (the default probe is): the frame's dev loss and accuracy are then measured on the probe
    pairs, from the frame's one pass. None otherwise (another corpus, or a run evaluated on its test split)."""
    name, *rest = probe.spec.split(":")
    if name != recipe.task or recipe.eval_split is not None or len(rest) != 2 or rest[0] not in _DEV_SPLITS.get(name, ()):
        return None
    try:
        examples = (datasets.snli if name == "snli" else datasets.mrpc)(
            corpora.SPLIT_ALIASES.get((name, rest[0]), rest[0]), int(rest[1]), probe.seed)
    except (ValueError, OSError):
        return None
    if [(e.text, e.text_b or "") for e in examples] != list(probe.inputs):
        return None  # not the same pairs (more than attention-change reads): keep the run's own dev sample
    return np.array([label_index(e.label) for e in examples], dtype=np.int64)


@dataclass(frozen=True, eq=False)
class Measured:
    """What one frame's pass gave: the word sample's vectors, the attention maps (step 0, kept as the reference) or
    the summed cosines with the kept maps (later frames), and the probe pairs' logits (None: not in the pass)."""

    vectors: object
    maps: AttentionMaps | None
    cosines: np.ndarray | None
    logits: np.ndarray | None


@dataclass(frozen=True, eq=False)
class FramePlan:
    """The inputs a frame encodes, tokenized once at step 0 and fed as they are at every frame.

    inputs      [attention-change's probe inputs ..., compare's sampled sentences not among them ...]
    tokenized   their Tokenized (the model's own max_length, as the command-line twins read them)
    attended    how many of the first inputs are attention-change's (the maps and, when dev_in_pass, the logits)
    sampled     {input index: index into read} for the inputs of compare's word sample
    read, keep, skipped   compare's sample (similarity.sample_inputs)
    dev_in_pass True when the attended inputs' logits are the dev scores (probe_targets), none cut shorter than
                the run's max_length
    """

    inputs: tuple
    tokenized: tuple
    attended: int
    sampled: dict
    read: tuple
    keep: tuple
    skipped: int
    dev_in_pass: bool

    @classmethod
    def of(cls, lm: LoadedModel, probe: ProbeSet, max_length: int, dev_in_pass: bool) -> "FramePlan":
        inputs = list(probe.inputs)
        pairs = any(isinstance(item, tuple) for item in inputs)
        # compare's sample: a pair probe's words are drawn from its pairs; a sentence probe's from compare's own
        # sentences (its first 500), so the frame equals `compare --corpus PROBE`.
        source = inputs if pairs else list(probe.sentences)
        positions, read, keep, skipped = sample_inputs(lm, source, DEFAULT_MAX_WORDS, probe.seed)
        where = {_key(item): k for k, item in enumerate(inputs)}
        sampled = {}
        for r, position in enumerate(positions):
            key = _key(source[position])
            if key not in where:
                where[key] = len(inputs)
                inputs.append(source[position])
            sampled[where[key]] = r
        tokenized = tokenize(lm, inputs)
        attended = len(probe.inputs)
        fits = all(t.n_tokens_full <= max_length for t in tokenized[:attended])
        return cls(tuple(inputs), tuple(tokenized), attended, sampled, tuple(read), tuple(keep), skipped,
                   dev_in_pass and fits)

    def measure(self, lm: LoadedModel, classifier: Classifier, maps: AttentionMaps | None,
                should_stop: StopCheck = None) -> Measured:
        """The frame's one forward pass over `inputs` (eager attention: the maps), and what it gives."""
        parts: dict[int, tuple] = {}
        kept_maps: list = []
        cosines = np.zeros((lm.num_layers, lm.num_heads))
        logits = None
        with _eager_attention(classifier.encoder):
            for batch in encode_batches(lm, list(self.tokenized), batch_size=FRAME_BATCH, model_output=self.dev_in_pass,
                                        should_stop=should_stop):
                for i, rows, words in batch_word_rows(batch):
                    if i in self.sampled:
                        parts[self.sampled[i]] = kept_rows(rows, words, self.keep[self.sampled[i]])
                attended = [(i, enc) for i, enc in batch.encodings() if i < self.attended]
                if maps is None:
                    kept_maps += attended
                else:
                    cosines += maps.cosines(lm.ref, attended, lm.num_heads)
                if self.dev_in_pass:
                    rows = [row for row, i in enumerate(batch.indices) if i < self.attended]
                    with torch.inference_mode():
                        values = classifier.logits_of(batch.output)[rows].float().cpu().numpy()
                    if logits is None:
                        logits = np.zeros((self.attended, values.shape[-1]), dtype=np.float32)
                    logits[[batch.indices[row] for row in rows]] = values
        vectors = assembled([parts[r] for r in range(len(self.read))], self.read)
        if maps is None:
            maps = AttentionMaps.of_encodings(lm.ref, self.inputs[: self.attended], lm.num_layers, lm.max_length,
                                              kept_maps)
            return Measured(vectors, maps, None, logits)
        return Measured(vectors, None, cosines, logits)


def _key(item) -> tuple:
    return tuple(item) if isinstance(item, tuple) else (item,)


class _eval_mode:
    """The model in eval mode (no dropout) for a measurement, then back in the mode it was in."""

    def __init__(self, model: Classifier):
        self.model = model

    def __enter__(self):
        self.training = self.model.training
        self.model.eval()
        return self.model

    def __exit__(self, *exc):
        self.model.train(self.training)
        return False


class _eager_attention:
    """Eager attention while the attention maps are read (SDPA, which training uses, returns none), then as it was."""

    def __init__(self, encoder):
        self.encoder = encoder

    def __enter__(self):
        self.attention = self.encoder.config._attn_implementation
        if self.attention != "eager":
            self.encoder.set_attn_implementation("eager")
        return self.encoder

    def __exit__(self, *exc):
        if self.attention != "eager":
            self.encoder.set_attn_implementation(self.attention)
        return False
