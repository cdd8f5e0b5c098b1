"""Seconds to patch every head ([layer, head] grid) of a classifier over gender-swap pairs, measured side by side.

    python bench/patching.py [--model minilm|bert-base] [--pairs 100] [--baseline-pairs 10] [--device cpu]
                             [--threads N] [--attribution] [--bound]

Pairs: SNLI dev items whose counterfactual swap (core.bias.swaps.DEFAULT_SWAPS: woman <-> man, ...) keeps the number
of word pieces; clean = the original, corrupted = the swapped copy; metric = logit of class 0.
Models: "minilm" = the real MiniLM-L6 encoder from the shared data folder (6 x 12 heads) with a random linear head;
"bert-base" = a randomly initialised BertConfig() (12 x 12 heads) with MiniLM's tokenizer (the same uncased
WordPiece vocabulary). Both SDPA attention. The numbers are meaningless; the speed is not.

    grid          core.analyses.patching.patch_many: every pair's grid, each patched row starting at its layer from
                  the cached corrupted layer input, pairs sharing padded batches (issue 47; bias-heads' path)
    grid per pair core.analyses.patching.patch one pair at a time (the page's and the CLI's path), timed on
                  the --baseline-pairs sample and scaled
    plain         what one forward per cell needs: L*H + 2 plain one-row forwards per pair (the classifier's own
                  forward, no hooks), timed on --baseline-pairs pairs spread evenly over all (their lengths as
                  all pairs') and scaled to --pairs (said so). The issue's
                  target is grid <= 0.25 x plain.
    whole         the grid before issue 47 (reuse_layers=False: every row through the whole model, the cells of a
                  pair batched), on the same sample, scaled
    attribution   (--attribution) core.analyses.patching.attribution_patch: two forwards and a backward per pair;
                  its Pearson r with the exact grid is printed (mean over pairs)

    bound         (--bound) the machine's bound, CPU seconds on the sample, no hooks: the L*H rows of a pair in
                  one batch through the whole model, and the grid's climb (H rows joining at each layer) with bare
                  layer calls, each against the L*H + 2 one-row forwards

The grid is compared with the whole-forward grid on the sample (max |difference|), so the speed-up is for the same
numbers. Prints one block for bench/RESULTS.md, with /proc/loadavg before and after (the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core import settings  # noqa: E402
from core.analyses import patching  # noqa: E402
from core.bias.flips import item_examples  # noqa: E402
from core.bias.swaps import DEFAULT_SWAPS, counterfactuals  # noqa: E402
from core.data import datasets  # noqa: E402
from core.model.encoding import tokenize  # noqa: E402
from core.model.loading import LoadedModel  # noqa: E402
from core.training.classifier import Classifier, LoadedClassifier  # noqa: E402


def classifier(name: str, device: str) -> LoadedClassifier:
    from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel

    folder = settings.data_dir() / "models" / "all-MiniLM-L6-v2"
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    torch.manual_seed(0)
    if name == "minilm":
        encoder = AutoModel.from_pretrained(str(folder), dtype=torch.float32, attn_implementation="sdpa")
    else:
        encoder = BertModel(BertConfig(attn_implementation="sdpa"))
    encoder = encoder.eval().to(device)
    model = Classifier(encoder, 3).eval().to(device)
    lm = LoadedModel(ref=name, path="", source="bench", model=encoder, tokenizer=tokenizer, device=device)
    return LoadedClassifier(encoder=lm, model=model, labels=("entailment", "neutral", "contradiction"),
                            head={"max_length": 128})


def swap_pairs(clf, n: int) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    examples = item_examples((e.text, e.text_b) for e in datasets.snli("dev", 3000, seed=0))
    cf = counterfactuals(examples, DEFAULT_SWAPS)
    pairs = []
    for i, swapped in zip(cf.indices, cf.examples):
        original = examples[i]
        a, b = tokenize(clf.encoder, [(original.text, original.text_b), (swapped.text, swapped.text_b)], 128)
        if len(a.tokens) == len(b.tokens):
            pairs.append(((original.text, original.text_b), (swapped.text, swapped.text_b)))
        if len(pairs) == n:
            break
    return pairs


class _clock:
    """Wall and this process's CPU seconds at once: on a machine shared with other jobs the wall time is stretched by
    their load, the CPU time much less; both are printed."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def __sub__(self, other: "_clock") -> "_Spent":
        return _Spent(self.wall - other.wall, self.cpu - other.cpu)


class _Spent:
    def __init__(self, wall: float, cpu: float):
        self.wall, self.cpu = wall, cpu

    def __mul__(self, k: float) -> "_Spent":
        return _Spent(self.wall * k, self.cpu * k)

    def __truediv__(self, other: "_Spent") -> str:
        return f"{self.wall / other.wall:.3f} (CPU {self.cpu / other.cpu:.3f})"

    def __format__(self, _spec: str) -> str:
        return f"{self.wall:7.1f} s wall, {self.cpu:7.1f} s CPU"


def plain_forwards(clf, pairs) -> None:
    """L*H + 2 plain one-row forwards per pair: what one forward per cell needs, without hooks."""
    n = clf.encoder.num_layers * clf.encoder.num_heads
    with torch.inference_mode():
        for clean, corrupt in pairs:
            feeds = [clf.tokenize([clean]), clf.tokenize([corrupt])]
            for k in range(n + 2):
                clf.logits(feeds[0 if k == 0 else 1])


def bound(clf, pairs) -> tuple[float, float, float]:
    """The machine's bound on the grid, in CPU seconds over `pairs` (no hooks, plain layer calls): (the L*H + 2
    one-row forwards, the L*H rows through the whole model in one batch, the grid's own climb: H rows join at each
    layer from the corrupted input there)."""
    from core.model.adapter import ModelAdapter

    adapter = ModelAdapter.of(clf.model)
    layers, heads = adapter.num_layers, adapter.num_heads
    spent = [0.0, 0.0, 0.0]

    def climb(inputs, calls, joining):
        hidden = None
        for layer in range(layers):
            rows = inputs[layer].expand(joining(layer), -1, -1)
            hidden = rows if hidden is None else torch.cat([hidden, rows]) if joining(layer) else hidden
            out = adapter.layers[layer](hidden, *calls[layer].args, **calls[layer].kwargs)
            hidden = out[0] if isinstance(out, tuple) else out
        return clf.model.head_logits(hidden)

    with torch.inference_mode():
        for _, corrupt in pairs:
            feed = clf.tokenize([corrupt])
            with adapter.capture(["resid_pre", "call"]) as store:
                clf.logits(feed)
            inputs = [store["resid_pre", layer] for layer in range(layers)]
            calls = [store["call", layer] for layer in range(layers)]
            work = (lambda: [clf.logits(feed) for _ in range(layers * heads + 2)],
                    lambda: climb(inputs, calls, lambda layer: layers * heads if layer == 0 else 0),
                    lambda: climb(inputs, calls, lambda layer: heads))
            for k, run in enumerate(work):
                start = time.process_time()
                run()
                spent[k] += time.process_time() - start
    return spent[0], spent[1], spent[2]


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip() if Path("/proc/loadavg").exists() else str(os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=("minilm", "bert-base"), default="minilm")
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--baseline-pairs", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--attribution", action="store_true")
    parser.add_argument("--bound", action="store_true", help="also time the machine's bound on the grid (no hooks)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    clf = classifier(args.model, args.device)
    pairs = swap_pairs(clf, args.pairs)
    before = loadavg()
    lengths = [len(tokenize(clf.encoder, [p[0]], 128)[0].tokens) for p in pairs]
    print(f"{args.model}: {clf.encoder.num_layers} x {clf.encoder.num_heads} heads, {len(pairs)} pairs "
          f"(word pieces: mean {np.mean(lengths):.1f}, {min(lengths)}-{max(lengths)}), {args.device}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}, {os.cpu_count()} cores; "
          f"/proc/loadavg before: {before}")
    items = [(a, b, 0) for a, b in pairs]

    start = _clock()
    grids = patching.patch_many(clf, items, "heads")
    t_grid = _clock() - start

    few = pairs[::max(1, len(pairs) // max(args.baseline_pairs, 1))][:args.baseline_pairs]  # lengths as all pairs'
    scale = len(pairs) / max(len(few), 1)
    start = _clock()
    single = [patching.patch(clf, a, b, 0, "heads") for a, b in few]
    t_single = (_clock() - start) * scale
    start = _clock()
    plain_forwards(clf, few)
    t_plain = (_clock() - start) * scale

    start = _clock()
    whole = [patching.patch(clf, a, b, 0, "heads", reuse_layers=False) for a, b in few]
    t_whole = (_clock() - start) * scale

    sampled = [grids[pairs.index(p)] for p in few]
    diff = max(float(np.abs(w.patched - g.patched).max()) for w, g in zip(whole, sampled))
    diff_single = max(float(np.abs(s.patched - g.patched).max()) for s, g in zip(single, sampled))
    cells = grids[0].patched.size
    scaled = "" if len(few) == len(pairs) else f" (timed on {len(few)} pairs, scaled to {len(pairs)})"
    print(f"  grid          {t_grid} ({t_grid.wall / len(pairs) * 1000:5.0f} ms wall per pair of {cells} cells)  "
          f"-> {t_grid / t_plain} x plain")
    print(f"  grid per pair {t_single}{scaled}  -> {t_single / t_plain} x plain; "
          f"max |per pair - grid| = {diff_single:.1e}")
    print(f"  plain         {t_plain}{scaled}: {cells + 2} one-row forwards per pair")
    print(f"  whole         {t_whole}{scaled}  -> {t_whole / t_plain} x plain; "
          f"max |whole - grid| = {diff:.1e}")
    if args.attribution:
        start = _clock()
        approx = [patching.attribution_patch(clf, a, b, 0, "heads") for a, b in pairs]
        t_attr = _clock() - start
        r = [patching.correlation(g, a) for g, a in zip(grids, approx)]
        print(f"  attribution   {t_attr}; Pearson r with "
              f"exact: mean {np.nanmean(r):.3f}, median {np.nanmedian(r):.3f}, min {np.nanmin(r):.3f}")
    if args.bound:
        plain, whole_batch, climb = bound(clf, few)
        print(f"  bound (sample, CPU, no hooks): {whole_batch / plain:.3f} x plain for the {cells} rows through the "
              f"whole model in one batch (batching gains {plain / whole_batch * cells / (cells + 2):.1f}x a row), "
              f"{climb / plain:.3f} x plain for the grid's climb of bare layers")
    print(f"  /proc/loadavg after: {loadavg()}")


if __name__ == "__main__":
    main()
