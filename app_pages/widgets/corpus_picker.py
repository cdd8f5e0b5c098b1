"""`corpus_picker`: the one source widget of every page that reads a corpus.

Every choice ends in core.data.corpus (`resolve` for named corpora, `from_text` / `from_upload` for what the user
types or uploads), so the pages and the CLI read the same sentences for the same choice.
"""

from __future__ import annotations

import hashlib
from typing import Callable, TypeVar

import streamlit as st

from core import settings
from core.data import corpus as corpora
from core.model.budget import BudgetCache, text_bytes
from core.data.datasets import DataUnavailable
from core.data.sources import BUILTIN, CONLLU, DATASETS, MRPC, SNLI, TEXT, TEXT_SOURCES, TREE_SOURCES, UD, UPLOAD, named_spec  # noqa: F401 (the pages import them from here)
from core.safe_text import markdown_text

CAPTIONS = {
    BUILTIN: "Everyday sentences written for this app; many words (bank, play, light…) recur in different senses.",
    SNLI: "Seeded SNLI premise/hypothesis pairs; entailment pairs count as positive pairs.",
    MRPC: "Seeded MRPC sentence pairs; paraphrase pairs count as positive pairs.",
    UD: "Seeded UD English EWT sentences with their gold dependency trees.",
}
T = TypeVar("T")


@st.cache_data(show_spinner="Reading the corpus…", max_entries=16)
def cached_resolve(spec: str, seed: int = 0) -> corpora.Corpus:
    return corpora.resolve(spec, seed)


# Parsed uploads, shared by every session within a byte budget (settings.upload_cache_bytes()). st.cache_data
# kept eight whole parsed files of any size and unpickled a copy of one into every rerun of every session (a
# 100 MB CSV left the server at 7.85 GB, issue 44); a parse larger than the budget is used once, not kept.
# Values are shared objects: never change one.
_UPLOADS = BudgetCache(settings.upload_cache_bytes(), max_entries=8, sizeof=text_bytes)


def parsed_upload(name: str, data: bytes, parse: Callable[[str, bytes], T]) -> T:
    """parse(name, data), kept in the shared byte-bounded cache under the file's name and content hash."""
    return keep_parsed((parse.__module__, parse.__qualname__, name, data), lambda: parse(name, data))


def keep_parsed(key: tuple, compute: Callable[[], T]) -> T:
    """compute(), kept in the shared byte-bounded cache of parsed uploads under `key` (bytes in it are replaced
    by their SHA-256: the cache keeps no file)."""
    key = tuple(hashlib.sha256(part).hexdigest() if isinstance(part, bytes) else part for part in key)
    with st.spinner("Reading the file…"):
        return _UPLOADS.get_or_compute(key, compute)


def cached_upload(name: str, data: bytes) -> corpora.Corpus:
    return parsed_upload(name, data, corpora.from_upload)


def corpus_picker(
    key: str,
    *,
    trees: bool = False,
    label: str = "Corpus",
    n_key: str | None = None,
    n_label: str = "Items to sample (seeded)",
    default_n: int = corpora.DEFAULT_N,
    seed: int = 0,
    horizontal: bool = True,
) -> corpora.Corpus | None:
    """Source radio (`{key}source`) and what the source needs: a text area (`{key}text`), an uploader
    (`{key}upload`), or split (`{key}split`) and seeded sample size (`n_key`, default `{key}dataset_limit`) for a
    dataset. `trees=True` offers only sources with dependency trees. Returns the corpus, or None after showing
    why (nothing given yet: st.info; bad input or missing data: st.error)."""
    sources = TREE_SOURCES if trees else TEXT_SOURCES
    if st.session_state.get(key + "source") not in sources:
        st.session_state[key + "source"] = sources[0]
    source = st.radio(label, sources, key=key + "source", horizontal=horizontal)
    try:
        if source == BUILTIN:
            corpus = cached_resolve(named_spec(BUILTIN))
        elif source == TEXT:
            text = st.text_area("Text (one sentence per line; long lines are split at . ! ?)", key=key + "text", height=150)
            if not text.strip():
                st.info("Give the corpus some text (paste or upload), or pick the built-in sentences.")
                return None
            corpus = corpora.from_text(text)
        elif source in (UPLOAD, CONLLU):
            kinds = ["conllu"] if source == CONLLU else ["txt", "csv", "jsonl"]
            upload = st.file_uploader(
                "A CoNLL-U treebank" if source == CONLLU else "A .txt (one sentence per line), a .csv with a header "
                "(a text column, or two such as sentence1/sentence2 for pairs) or a .jsonl (one object per line, "
                "same keys)", type=kinds, key=key + "upload",
            )
            if upload is None:
                st.info("Give the corpus some text (paste or upload), or pick the built-in sentences.")
                return None
            corpus = cached_upload(upload.name, upload.getvalue())
        else:
            name = DATASETS[source]
            splits = corpora.DATASET_SPLITS[name]
            if st.session_state.get(key + "split") not in splits:
                st.session_state[key + "split"] = splits[0]
            c1, c2 = st.columns(2)
            split = c1.selectbox("Split", splits, key=key + "split")
            n_key = n_key or key + "dataset_limit"
            st.session_state.setdefault(n_key, default_n)
            n = int(c2.number_input(n_label, 1, 10_000, step=50, key=n_key))
            corpus = cached_resolve(named_spec(source, split, n), seed)
        if source in CAPTIONS:
            st.caption(f"{markdown_text(corpus.name)}: {len(corpus.items)} items, {len(corpus)} unique sentences. {CAPTIONS[source]}")
        if trees:
            corpora.require_trees(corpus)
        return corpus
    except (corpora.CorpusError, DataUnavailable) as err:
        st.error(markdown_text(err))
        return None
