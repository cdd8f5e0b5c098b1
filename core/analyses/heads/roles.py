"""What the head analyses share: the protocols, how a head is named, and which tokens of an input play which
role ([CLS], [SEP], punctuation, sentence A or B)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core import numbering
from core.model.encoding import Encoding, is_punctuation
from core.protocols import DEFAULT, check

PROTOCOLS = (DEFAULT, "clark")
# The `protocol` setting's help, one text for the survey and the syntactic heads (core.contract declarations).
PROTOCOL_HELP = ("bertlens: BERT Lens's readable default (any punctuation; dependent->head only, roots skipped, any "
                 "offset as baseline); clark: Clark et al. 2019 as his code (periods and commas; both directions, "
                 "roots as misses, poss rule, offsets -3..+2, heads from 1)")
CLARK_PUNCTUATION = (".", ",")


def head_label(layer: int, head: int, protocol: str = DEFAULT) -> str:
    """How the head at array index (layer, head) is named in tables and captions: "L8 H9" (layers 1..L as every
    chart shows them, core.numbering; heads from 0 as bertviz) or, under the Clark protocol, "8-10" as in the paper."""
    return f"{numbering.shown(layer)}-{head + 1}" if protocol == "clark" else numbering.head_name(layer, head)


@dataclass(frozen=True)
class TokenRoles:
    """Which keys of one input count as what. All [T] bool except segment_ids [T] int.

    cls: the first token when it is a special token; sep: every other special token (both [SEP]s of a pair);
    punct: non-special punctuation pieces; segment_ids: 0 = sentence A, 1 = sentence B; is_pair.
    """

    cls: np.ndarray
    sep: np.ndarray
    punct: np.ndarray
    segment_ids: np.ndarray
    is_pair: bool

    @property
    def special(self) -> np.ndarray:
        return self.cls | self.sep


def token_roles(tokens: Sequence[str], special_mask: np.ndarray, segment_ids: np.ndarray, is_pair: bool,
                protocol: str = DEFAULT) -> TokenRoles:
    """punct: any punctuation piece (bertlens) or exactly "." / "," (clark, as his General_Analysis.ipynb)."""
    check(protocol, PROTOCOLS)
    special = np.asarray(special_mask, dtype=bool)
    cls = np.zeros(len(tokens), dtype=bool)
    if len(tokens) and special[0]:
        cls[0] = True
    sep = special & ~cls
    is_punct = (lambda t: t in CLARK_PUNCTUATION) if protocol == "clark" else is_punctuation
    punct = np.array([not s and is_punct(t) for t, s in zip(tokens, special)], dtype=bool)
    return TokenRoles(cls, sep, punct, np.asarray(segment_ids, dtype=np.int64), bool(is_pair))


def roles_of(encoding: Encoding, protocol: str = DEFAULT) -> TokenRoles:
    return token_roles(encoding.tokens, encoding.special_mask, encoding.segment_ids, encoding.is_pair, protocol)


def check_attention(attentions: np.ndarray, n_tokens: int | None = None) -> np.ndarray:
    """attentions [layer, head, query, key] as float64, or a ValueError that names the shape found."""
    a = np.asarray(attentions, dtype=np.float64)
    if a.ndim != 4 or a.shape[2] != a.shape[3]:
        raise ValueError(f"attention must be [layer, head, query, key] with query = key, got shape {a.shape}")
    if n_tokens is not None and a.shape[-1] != n_tokens:
        raise ValueError(f"attention has {a.shape[-1]} positions, while the input has {n_tokens} tokens")
    return a
