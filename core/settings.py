"""Where things live, read from the environment each time so tests can move them.

Environment variables (all optional):
    BERTLENS_CACHE  folder for downloaded and fine-tuned models (default: <repo>/models_cache)
    BERTLENS_MODEL  the model the app opens with (default: bert-base-uncased)
    BERTLENS_DATA   local data folder laid out like ../shared/data (default: <repo>/../shared/data)
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
