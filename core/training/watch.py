"""Measuring a classifier while it is fine-tuned: the frames of its time-lapse (core.training.timelapse).

The engine's step loop calls `Watch.at(step)` before the first update and after every step; at the planned steps
the model is measured against the starting model with the code of the command-line twins, on the same sample:

- RSA and CKA per layer: core.analyses.similarity's `Reference` (the starting model encoded once), as
  `python -m core compare --a BASE --b RUN --corpus PROBE --seed S` (its first 500 sentences, 1,500 words);
- attention change per head: core.analyses.heads.change's `AttentionMaps` (the starting model's maps kept), as
  `python -m core attention-change --a BASE --b RUN --corpus PROBE --seed S` (its first 200 inputs);
- anisotropy per layer: mean cosine of seeded random pairs of words from different sentences of the word sample;
- loss and accuracy on a seeded sample of the run's evaluation examples (core.training.classifier.predict_logits);
- UUAS per layer when the probe set has dependency trees, as `python -m core probe --corpus PROBE --seed S`.

Measuring runs in eval mode (eager attention while the maps are read), under a forked random state, so the
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
from core.analyses.similarity import DEFAULT_MAX_WORDS, Reference
from core.data import corpus as corpora
from core.data.datasets import seeded_subset
from core.files import atomic_path
from core.model.classifier import Classifier, predict_logits, save_classifier, text_features
from core.model.loading import LoadedModel, checkpoint_folder
from core.progress import StopCheck
from core.training import timelapse as tl
from core.training.runs import RunFolder

# What the command-line twins read by default: compare --limit 500 --max-words 1500, attention-change --limit 200.
COMPARE_SENTENCES = 500
ATTENTION_INPUTS = 200
DEV_EXAMPLES = 100  # evaluation examples each frame's loss and accuracy are measured on (seeded sample), as many as
# the default probe set has pairs: each costs a forward pass at every frame (bench/timelapse.py)
ANISOTROPY_PAIRS = 1000


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
        dev = seeded_subset(list(eval_examples), DEV_EXAMPLES, recipe.seed)
        self.dev_features = text_features(tokenizer, [(e.text, e.text_b) for e in dev], max_length)
        self.dev_targets = np.array([label_index(e.label) for e in dev], dtype=np.int64)
        self.pad_id = tokenizer.pad_token_id or 0
        self.steps: tuple[int, ...] = ()
        self.writer: tl.TimelapseWriter | None = None
        self.reference: Reference | None = None
        self.maps: AttentionMaps | None = None

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
        if self.reference is None:
            # Step 0: the starting model, encoded once and kept for every later frame; frame 0 compares it with
            # itself (the model is still the starting model) without encoding it a second time.
            self.reference = Reference.of(now, list(self.probe.sentences), max_words=DEFAULT_MAX_WORDS,
                                          seed=self.probe.seed, should_stop=self.should_stop)
            with _eager_attention(self.model.encoder):
                self.maps = AttentionMaps.of(now, list(self.probe.inputs), should_stop=self.should_stop)
            vectors = self.reference.vectors
            similarity = self.reference.versus(now.ref, vectors, self.should_stop)
            change = self.maps.unchanged()
        else:
            similarity, vectors = self.reference.compare(now, should_stop=self.should_stop)
            with _eager_attention(self.model.encoder):
                change = self.maps.change(now, should_stop=self.should_stop)
        anisotropy = random_pair_cosine(vectors.vectors.transpose(1, 0, 2), vectors.sentence, ANISOTROPY_PAIRS,
                                        self.probe.seed).mean
        loss, accuracy = self._dev_scores()
        return tl.Frame(step, loss, accuracy, similarity.rsa, similarity.cka, anisotropy, change.cosine,
                        self._uuas(now))

    def _dev_scores(self) -> tuple[float, float]:
        logits = predict_logits(self.model, self.dev_features, batch_size=2 * self.recipe.batch_size, pad_id=self.pad_id,
                                device=self.device)
        logits = torch.as_tensor(np.asarray(logits, dtype=np.float32))
        targets = torch.as_tensor(self.dev_targets)
        return float(F.cross_entropy(logits, targets)), float((logits.argmax(-1) == targets).float().mean())

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
