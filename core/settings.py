"""Where things live, read from the environment each time so tests can move them.

Environment variables (all optional):
    BERTLENS_CACHE  folder for downloaded and fine-tuned models (default: <repo>/models_cache)
    BERTLENS_MODEL  the model the app opens with (default: bert-base-uncased)
    BERTLENS_DATA   local data folder laid out like ../shared/data (default: <repo>/../shared/data)
    BERTLENS_ENCODING_CACHE_BYTES  the app's budget for cached forward passes, shared by all sessions
                    (default 1G; a number of bytes, or with a K/M/G suffix)
    BERTLENS_MODEL_CACHE_BYTES     the budget for loaded models (default 4G); BERTLENS_MODEL_CACHE_ENTRIES (default 4)
    BERTLENS_MAX_MODEL_PARAMETERS  the largest model loaded, in parameters its config implies (default 4B; a number,
                    or with a K/M/B suffix: decimal, 1B = 10^9)
    BERTLENS_MAX_CORPUS_BYTES      the most of a corpus file read (default 32M; a number of bytes or K/M/G)
    BERTLENS_MAX_JOBS              long jobs run at once by one server or command (default 2); the rest queue
    BERTLENS_UPLOAD_CACHE_BYTES    the app's budget for parsed uploads, shared by all sessions (default 256M)
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = "bert-base-uncased"


def cache_dir() -> Path:
    return Path(os.environ.get("BERTLENS_CACHE", REPO_ROOT / "models_cache")).expanduser()


def hub_cache_dir() -> Path:
    """Hugging Face hub downloads, in the hub's own layout (models--org--name/snapshots/...)."""
    return cache_dir() / "hub"


def runs_dir() -> Path:
    """Fine-tuned and contrastive runs, one folder each."""
    return cache_dir() / "runs"


def default_model() -> str:
    return os.environ.get("BERTLENS_MODEL", DEFAULT_MODEL)


def data_dir() -> Path:
    return Path(os.environ.get("BERTLENS_DATA", REPO_ROOT.parent / "shared" / "data")).expanduser()


def parse_bytes(text: str) -> int:
    """"1G", "512M", "64k" or a plain number of bytes -> bytes (binary units: 1K = 1024)."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(float(text))


def encoding_cache_bytes() -> int:
    return parse_bytes(os.environ.get("BERTLENS_ENCODING_CACHE_BYTES", "1G"))


def model_cache_bytes() -> int:
    return parse_bytes(os.environ.get("BERTLENS_MODEL_CACHE_BYTES", "4G"))


def model_cache_entries() -> int:
    return int(os.environ.get("BERTLENS_MODEL_CACHE_ENTRIES", "4"))


def parse_count(text: str) -> int:
    """"4B", "500M", "10k" or a plain number -> a count (decimal units: 1B = 10^9, as parameter counts are quoted)."""
    text = text.strip().upper()
    units = {"K": 10 ** 3, "M": 10 ** 6, "B": 10 ** 9, "G": 10 ** 9, "T": 10 ** 12}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(float(text))


def max_model_parameters() -> int:
    return parse_count(os.environ.get("BERTLENS_MAX_MODEL_PARAMETERS", "4B"))


def max_corpus_bytes() -> int:
    return parse_bytes(os.environ.get("BERTLENS_MAX_CORPUS_BYTES", "32M"))


def max_jobs() -> int:
    return max(1, int(os.environ.get("BERTLENS_MAX_JOBS", "2")))


def upload_cache_bytes() -> int:
    return parse_bytes(os.environ.get("BERTLENS_UPLOAD_CACHE_BYTES", "256M"))
