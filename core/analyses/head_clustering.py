"""Clark et al. (2019) §6: which heads behave alike. The distance between two heads is the Jensen–Shannon
divergence between their attention distributions, summed over the query tokens of an input and averaged over the
corpus; metric MDS embeds the [heads × heads] matrix in 2-D.

As clarkkev/attention-analysis's head_distances.py: every row is smoothed to 0.999·a + 0.001/T before the
divergence (natural log), the divergence is summed over the input's query tokens, and the paper's MDS is
sklearn's metric MDS on the precomputed matrix (n_init 5, max_iter 1000, eps 1e-10). His file sums over the
inputs; this averages them (the same map, scaled by 1/N), so corpora of any size read on one scale.
"""

from __future__ import annotations

# sklearn imported in functions: importing this module (the CLI's --help, the studies list, the pages) must not load
# them.
import inspect
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core import numbering
from core.model.encoding import TextInput, encode_stream
from core.analyses.heads import STAT_NAMES, example_stats, roles_of
from core.model.loading import LoadedModel
from core.progress import ProgressCallback, StopCheck

SMOOTHING = 0.001


def js_distances(attentions: np.ndarray) -> np.ndarray:
    """float64 [L·H, L·H]: Clark's head distances for one input; attentions [L, H, T, T]. Head index = layer·H +
    head. Symmetric with a zero diagonal."""
    a = np.asarray(attentions, dtype=np.float64)
    n_heads = a.shape[0] * a.shape[1]
    t = a.shape[-1]
    p = SMOOTHING / t + (1 - SMOOTHING) * a.reshape(n_heads, t, t)
    # JS(P, Q) = ½ Σ P log P + ½ Σ Q log Q − Σ M log M with M = (P + Q)/2, summed over the query rows: the first
    # two terms once per head, the last once per pair (upper triangle only, in reused buffers: this is the cost).
    neg_entropy = np.einsum("hqk,hqk->h", p, np.log(p))
    out = np.zeros((n_heads, n_heads))
    m = np.empty_like(p)
    log_m = np.empty_like(p)
    for i in range(n_heads - 1):
        k = n_heads - i - 1
        np.add(p[i + 1:], p[i], out=m[:k])
        m[:k] *= 0.5
        np.log(m[:k], out=log_m[:k])
        mixed = np.einsum("hqk,hqk->h", m[:k], log_m[:k])
        out[i, i + 1:] = 0.5 * (neg_entropy[i] + neg_entropy[i + 1:]) - mixed
    out = out + out.T
    return np.maximum(out, 0.0)  # rounding can leave -1e-17 for identical heads


def layer_closeness(distances: np.ndarray, n_heads: int) -> tuple[float, float]:
    """(mean distance between two different heads of the same layer, mean distance between heads of different
    layers); distances [L·H, L·H] with head index layer·H + head. Clark's "same layer ⇒ close" holds when the
    first is smaller."""
    d = np.asarray(distances, dtype=np.float64)
    layer = np.arange(len(d)) // n_heads
    same = layer[:, None] == layer[None, :]
    off = ~np.eye(len(d), dtype=bool)
    return float(d[same & off].mean()), float(d[~same].mean())


def mds_2d(distances: np.ndarray, seed: int = 0) -> np.ndarray:
    """float64 [N, 2]: metric MDS of a precomputed distance matrix, with Clark's settings."""
    from sklearn.manifold import MDS

    params = inspect.signature(MDS).parameters
    # scikit-learn 1.8 renamed the switches (metric_mds, metric="precomputed"); older ones take metric=True.
    if "metric_mds" in params:
        mds = MDS(n_components=2, metric_mds=True, metric="precomputed", n_init=5, init="random", max_iter=1000,
                  eps=1e-10, random_state=seed)
    else:
        mds = MDS(n_components=2, metric=True, dissimilarity="precomputed", n_init=5, max_iter=1000, eps=1e-10,
                  random_state=seed)
    return mds.fit_transform(np.asarray(distances, dtype=np.float64))


@dataclass(frozen=True)
class HeadMap:
    """Clark §6 for one model. L layers, H heads, N = L·H (index layer·H + head).

    distances  float64 [N, N] mean over inputs of js_distances
    points     float64 [N, 2] the 2-D MDS embedding
    stats      float64 [len(STAT_NAMES), L, H] Clark's statistics of each head on the same inputs (the hover's
               "top statistic" is the largest of cls/sep/punct/self/prev/next)
    """

    model: str
    n_layers: int
    n_heads: int
    distances: np.ndarray
    points: np.ndarray
    stats: np.ndarray
    n_examples: int
    corpus: str = ""

    def top_statistic(self) -> list[tuple[str, float]]:
        """Per head (index layer·H + head): the name and value of its largest attention-mass statistic."""
        names = [n for n in STAT_NAMES if n != "entropy"]
        block = np.stack([self.stats[STAT_NAMES.index(n)] for n in names]).reshape(len(names), -1)
        best = block.argmax(axis=0)
        return [(names[k], float(block[k, i])) for i, k in enumerate(best)]

    def to_json(self) -> dict:
        top = self.top_statistic()
        heads = [{"layer": numbering.shown(i // self.n_heads), "head": i % self.n_heads, "x": float(self.points[i, 0]),
                  "y": float(self.points[i, 1]), "top_statistic": top[i][0], "top_value": round(top[i][1], 6)}
                 for i in range(len(top))]
        return {"model": self.model, "corpus": self.corpus, "n_examples": self.n_examples, "heads": heads,
                "distances": self.distances.round(6).tolist()}


def head_map(lm: LoadedModel, inputs: Sequence[TextInput], *, batch_size: int = 16, seed: int = 0,
             progress: ProgressCallback = None, should_stop: StopCheck = None) -> HeadMap:
    if not inputs:
        raise ValueError("the corpus is empty")
    dist = stats = None
    n = 0
    for _, enc in encode_stream(lm, list(inputs), batch_size=batch_size, hidden_states=False,
                                progress=progress, should_stop=should_stop):
        d = js_distances(enc.attentions)
        s = example_stats(enc.attentions, roles_of(enc))
        dist, stats = (d, s) if dist is None else (dist + d, stats + s)
        n += 1
    dist, stats = dist / n, stats / n
    layers, heads = stats.shape[1:]
    return HeadMap(lm.ref, layers, heads, dist, mds_2d(dist, seed), stats, n)


