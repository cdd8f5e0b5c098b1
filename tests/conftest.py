"""Shared fixtures: a tiny random BERT with a hand-made vocabulary, the real small model and data in
BERTLENS_DATA (skipped when absent, a failure under CI=true), and a private models_cache per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TINY_VOCAB = (
    "[PAD] [UNK] [CLS] [SEP] [MASK] the a cat dog sat ran on in at to of and is was mat river bank money "
    "deposit water he she it they man woman girl boy park house tree . , ? ! ' ##s ##ed ##ing ##ly un ##happy"
).split()


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_data(path: Path, what: str) -> Path:
    """Skip (or fail under CI) when a file from the shared data folder is missing."""
    if path.exists():
        return path
    message = f"{what} not found at {path} (set BERTLENS_DATA to a folder laid out like ../shared/data)"
    if _in_ci():
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own models_cache so nothing leaks between tests or into the repo."""
    cache = tmp_path / "models_cache"
    cache.mkdir()
    monkeypatch.setenv("BERTLENS_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    yield cache
    stop_leftover_jobs()


def stop_leftover_jobs(timeout: float = 60.0) -> None:
    """Cancel the thread jobs a test left running in this process (presenter mode prepares a study and corpus passes
    ahead) and wait for them: transformers' from_pretrained swaps torch's init functions for no-ops process-wide
    while it loads, so a job still loading a model during a later test left that test's random models
    uninitialised. Process jobs run in their own process and are left alone."""
    import sys

    if "core.jobs" not in sys.modules:
        return
    from core import jobs

    running = [job for job in list(jobs._live.values())
               if not job.process and job.thread is not None and job.thread.is_alive()]
    for job in running:
        jobs.cancel(job.id)
    for job in running:
        job.thread.join(timeout=timeout)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    from core import settings

    return require_data(settings.data_dir(), "the shared data folder")


@pytest.fixture(scope="session")
def minilm_dir(data_dir) -> Path:
    return require_data(data_dir / "models" / "all-MiniLM-L6-v2", "the MiniLM-L6 model")


def make_tiny_bert(folder: Path, *, layers: int = 2, heads: int = 4, hidden: int = 32, seed: int = 0,
                   positions: int = 64) -> Path:
    """A randomly initialised BERT with TINY_VOCAB, saved as safetensors with a fast tokenizer; it reads
    `positions` tokens at most."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {piece: i for i, piece in enumerate(TINY_VOCAB)}
    tokenizer = BertTokenizerFast(vocab=vocab, do_lower_case=True, model_max_length=positions)
    config = BertConfig(
        vocab_size=len(TINY_VOCAB),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=hidden * 2,
        max_position_embeddings=positions,
    )
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


# ---- ModernBERT (issue 46): a tiny random ModernBertForMaskedLM, built by tests/tiny_modernbert.py ---------------
@pytest.fixture(scope="session")
def tiny_modernbert_dir(tmp_path_factory) -> Path:
    from tests.tiny_modernbert import make_tiny_modernbert

    return make_tiny_modernbert(tmp_path_factory.mktemp("tiny-modernbert"))


# ---- DeBERTa-v2/v3 (issue 46) ----------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def tiny_deberta_dir(tmp_path_factory) -> Path:
    """A tiny random DebertaV2ForMaskedLM (relative attention, c2p and p2c, 8 position buckets, DeBERTa-v3's
    shared attention key and MLM head) with a SentencePiece-style tokenizer: tests/tiny_deberta.py."""
    from tests.tiny_deberta import make_tiny_deberta

    return make_tiny_deberta(tmp_path_factory.mktemp("tiny-deberta"))
