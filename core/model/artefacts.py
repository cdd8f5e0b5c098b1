"""What is fitted on top of a model and saved beside it: masked-word heads, tuned lenses, sparse autoencoders,
concept erasers.

A fitted masked-word head is a whole model folder (the encoder's weights plus the head) under
`models_cache/heads/NAME`, so it loads like any model and is listed by core.model.loading.available_models
with the model it was fitted on. A tuned lens (`lens.safetensors`), a sparse autoencoder (`sae.safetensors`) or a
LEACE concept eraser (`eraser.safetensors`) is a folder under `models_cache/lenses/NAME`, `models_cache/saes/NAME`
or `models_cache/erasers/NAME` whose `config.json` names its model.
Folders being written carry a dotted temporary name until they are complete (core.files), so none is listed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from core import settings

# kind -> (folder under the cache, the weights file that marks a complete artefact)
KINDS = {"tuned-lens": ("lenses", "lens.safetensors"), "sae": ("saes", "sae.safetensors"),
         "eraser": ("erasers", "eraser.safetensors")}


@dataclass(frozen=True)
class Artefact:
    """One saved lens or autoencoder: `name` (its folder's), `kind` (a key of KINDS), `model` (the model it
    reads, as its config.json names it) and `path` (the folder)."""

    name: str
    kind: str
    model: str
    path: str


def heads_dir() -> Path:
    """Fitted masked-word heads, one whole model folder each."""
    return settings.cache_dir() / "heads"


def artefact_dir(kind: str) -> Path:
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")
    return settings.cache_dir() / KINDS[kind][0]


def fitted_on(folder: Path) -> str:
    """The model a saved folder was fitted on (config.json's "model", or for a head "bertlens_fitted_on"); "" if none."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return ""
    return str(config.get("model") or config.get("bertlens_fitted_on") or "")


def list_artefacts(kind: str | None = None) -> list[Artefact]:
    """Every complete lens and autoencoder (or those of one kind), by kind then name."""
    found = []
    for each in ([kind] if kind else list(KINDS)):
        folder = artefact_dir(each)
        if not folder.is_dir():
            continue
        for entry in sorted(folder.iterdir()):
            if entry.is_dir() and not entry.name.startswith(".") and (entry / KINDS[each][1]).is_file():
                found.append(Artefact(entry.name, each, fitted_on(entry), str(entry)))
    return found


def find_artefact(kind: str, name: str) -> Artefact:
    """The saved artefact of a kind by name (or by folder path); ValueError naming those there are."""
    path = Path(name).expanduser()
    if path.is_dir() and (path / KINDS.get(kind, ("", "?"))[1]).is_file():
        return Artefact(path.name, kind, fitted_on(path), str(path))
    known = list_artefacts(kind)
    for artefact in known:
        if artefact.name == name:
            return artefact
    names = ", ".join(a.name for a in known) or "none yet"
    raise ValueError(f"no {kind} named {name!r} in {artefact_dir(kind)} (saved: {names})")


# ---- a fitted masked-word head that learned little more than one word (issue 47) ----------------------------------
# fit-mlm-head measures its head on held-out masked words against the best constant guess and writes the figures in
# the saved config.json ("bertlens_fit"); a head under this many times the constant's accuracy is flagged wherever it
# is saved, listed and used, as a classifier run that learned (almost) nothing is.
WEAK_HEAD_RATIO = 1.5
FIT_KEY = "bertlens_fit"


def weak_head_message(name: str, fit: dict | None) -> str | None:
    """The warning for a fitted head whose held-out top-1 is under WEAK_HEAD_RATIO × the best constant guess's
    (`fit`: the figures fit-mlm-head saved); None when it beats that or there are no figures (a head fitted before
    they were saved, or any other model)."""
    try:
        top1, constant = float(fit["top1_accuracy"]), float(fit["constant_accuracy"])
    except (TypeError, KeyError, ValueError):
        return None
    if top1 + 1e-9 >= WEAK_HEAD_RATIO * constant and top1 > 0:  # 1e-9: 0.3 is 1.5 × 0.2 (in floats, just under)
        return None
    word = str(fit.get("constant_word", ""))
    return (f"weak head '{name}': it guesses {top1:.1%} of held-out masked words right, against {constant:.1%} for "
            f"always guessing '{word}', under {WEAK_HEAD_RATIO:g}× that, so its guesses are little better than one "
            "word for every blank. Fit it again with fit-mlm-head's defaults (more sentences).")


def head_fit(folder) -> dict | None:
    """The figures fit-mlm-head saved in a model folder's config.json; None for a folder without them."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    found = config.get(FIT_KEY) if isinstance(config, dict) else None
    return found if isinstance(found, dict) else None


def head_warning(folder) -> str | None:
    """weak_head_message for the model folder `folder` (a fitted head's, or any model's: None)."""
    return weak_head_message(Path(str(folder)).name, head_fit(folder))
