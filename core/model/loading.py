"""Finding and loading BERT-family encoders: hub ids, local folders, and fine-tuned runs.

Weights load from safetensors only and never with remote code. A model that is neither on disk nor
reachable fails within a few seconds (transformers on its own retries for ~26 s offline) with an error
that lists what *is* available.
"""

from __future__ import annotations

# torch, transformers and huggingface_hub imported in functions: `python -m core --help` and the studies list
# must start without them.
import concurrent.futures
import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from safetensors import SafetensorError, safe_open

from core import settings
from core.validation import nesting_problem
from core.model import artefacts, distributed

# The families as people name them: the `models` command, the sidebar's model help, the adapter's errors.
FAMILY_NAMES = ("BERT, RoBERTa, XLM-R, CamemBERT, MiniLM, ELECTRA, DistilBERT, ALBERT, MPNet, ModernBERT, "
                "DeBERTa-v3 (DeBERTa-v2, mDeBERTa-v3)")
# Encoder-only families whose eager attention returns per-head probabilities.
SUPPORTED_MODEL_TYPES = frozenset(
    {"bert", "distilbert", "roberta", "xlm-roberta", "camembert", "electra", "albert", "mpnet", "modernbert",
     "deberta-v2"}
)
# Families transformers runs with eager attention only (no SDPA): a load asking for "sdpa" gets eager instead of
# transformers' ValueError (training and the classifier loops ask for SDPA for speed).
EAGER_ONLY_MODEL_TYPES = frozenset({"deberta-v2"})
# What a hub download fetches: configs, tokenizer files and safetensors weights, never pickles.
HUB_FILE_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.model", "merges.txt"]
HUB_CONNECT_TIMEOUT_S = 3.0
# How long a hub check is believed: the sidebar asks on every rerun, and an unreachable hub may cost the full timeout.
HUB_CHECK_MAX_AGE_S = 120.0


class ModelUnavailable(RuntimeError):
    """The model could not be found locally nor fetched; the message says what to do instead."""


@dataclass(frozen=True)
class ModelEntry:
    """One model that loads without the network."""

    name: str  # what to pass to load_model
    source: str  # "hub-cache", "run", "checkpoint" (a run at a step: NAME@STEP), "local", or "fitted-head" (an
    # encoder with a fitted masked-word head)
    path: str
    fitted_on: str = ""  # for a fitted head: the model it was fitted on
    warning: str = ""  # for a fitted head under 1.5x the best constant guess: why it is weak (artefacts.head_warning)


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """An encoder in eval mode plus its fast tokenizer. Shared between users: never mutate it."""

    ref: str
    path: str
    source: str
    model: object  # transformers.PreTrainedModel
    tokenizer: object  # transformers.PreTrainedTokenizerFast
    device: str
    # The checkpoint's masked-word model when it has an MLM head and was loaded with masked_lm=True; `model`
    # is then its own encoder (the same object), so the pages and the Masked words page share one load.
    masked_lm: object | None = None

    @property
    def config(self):
        return self.model.config

    @property
    def num_layers(self) -> int:
        return int(getattr(self.config, "num_hidden_layers", getattr(self.config, "n_layers", 0)))

    @property
    def num_heads(self) -> int:
        return int(getattr(self.config, "num_attention_heads", getattr(self.config, "n_heads", 0)))

    @property
    def hidden_size(self) -> int:
        return int(getattr(self.config, "hidden_size", getattr(self.config, "dim", 0)))

    @property
    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    @property
    def max_length(self) -> int:
        """Longest input in tokens, special tokens included."""
        limits = [getattr(self.config, "max_position_embeddings", 512)]
        if self.config.model_type in ("roberta", "xlm-roberta", "camembert"):
            limits = [limits[0] - 2]  # RoBERTa reserves two positions for its padding offset
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if tok_max and tok_max < 100_000:
            limits.append(int(tok_max))
        return int(min(limits))


def display_name(ref: str) -> str:
    """The short name a chart, legend, run name or button shows for a model reference: a folder path becomes its
    last component ("/data/models/all-MiniLM-L6-v2" -> "all-MiniLM-L6-v2"), a hub id ("org/name") stays as it is.
    The full reference belongs in a tooltip or help= beside it."""
    text = str(ref).rstrip("/\\")
    is_path = (text.startswith(("/", ".", "~", "\\")) or (len(text) > 1 and text[1] == ":")
               or text.count("/") > 1 or "\\" in text or Path(text).is_dir())
    return re.split(r"[/\\]", text)[-1] if is_path else text


def display_names(refs) -> dict[str, str]:
    """Each reference's display name, or the reference itself where two of them would show the same name (a list
    of choices must tell them apart, and a selectbox maps the shown name back to its reference)."""
    names = {ref: display_name(ref) for ref in refs}
    shared = {name for name in names.values() if list(names.values()).count(name) > 1}
    return {ref: ref if name in shared else name for ref, name in names.items()}


def display_name_among(refs):
    """A choice box's format_func for model references: each one's name in display_names(refs), any other
    reference (one typed into the box) by its display name. The box's value stays the reference."""
    names = display_names(refs)
    return lambda ref: names.get(ref) or display_name(ref)


def pick_device() -> str:
    import torch

    if distributed.launched_world_size() > 1:
        return distributed.current().device  # each rank its own GPU (or the CPU)
    wanted = os.environ.get("BERTLENS_DEVICE")
    if wanted:
        return wanted
    return "cuda" if torch.cuda.is_available() else "cpu"


def _has_model_files(folder: Path) -> bool:
    return (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))


# A run trained with a time-lapse keeps its model at some frames (`finetune --keep-checkpoints K`), each a complete
# run folder at runs_dir()/NAME/checkpoints/step-STEP, loaded by the name NAME@STEP (core.training.timelapse).
CHECKPOINTS = "checkpoints"


def checkpoint_folder(run_folder: Path, step: int) -> Path:
    return Path(run_folder) / CHECKPOINTS / f"step-{int(step)}"


def kept_steps(run_folder: Path) -> list[int]:
    """The steps of a run folder whose checkpoint is complete, in order."""
    found = Path(run_folder) / CHECKPOINTS
    steps = [int(p.name[5:]) for p in found.glob("step-*") if p.name[5:].isdigit() and _has_model_files(p)] if found.is_dir() else []
    return sorted(steps)


def _run_checkpoint(ref: str) -> Path | None:
    """The folder of NAME@STEP when NAME is a finished run; ModelUnavailable listing the kept steps when that run
    kept none at STEP; None when NAME is no run (then `ref` may still be a hub id)."""
    name, at, step = ref.rpartition("@")
    run = settings.runs_dir() / name
    if not at or not name or name.startswith(".") or not run.is_dir():
        return None
    kept = kept_steps(run)
    if step.isdigit() and int(step) in kept:
        return checkpoint_folder(run, int(step))
    listed = (f"it kept steps {', '.join(str(s) for s in kept)} ({', '.join(f'{name}@{s}' for s in kept)})" if kept
              else "it kept no checkpoints (train with --timelapse N --keep-checkpoints K to keep some)")
    raise ModelUnavailable(f"Run '{name}' has no checkpoint at step '{step}': {listed}.")


def _hub_snapshot(ref: str) -> Path | None:
    """The newest complete snapshot of a hub id in our cache, if any."""
    repo_dir = settings.hub_cache_dir() / ("models--" + ref.replace("/", "--"))
    snapshots = sorted((repo_dir / "snapshots").glob("*"), key=lambda p: p.stat().st_mtime, reverse=True)
    return next((s for s in snapshots if _has_model_files(s)), None)


def available_models() -> list[ModelEntry]:
    """Models that load offline: cached hub downloads, finished runs, and models in the data folder."""
    entries: list[ModelEntry] = []
    hub = settings.hub_cache_dir()
    if hub.is_dir():
        for repo_dir in sorted(hub.glob("models--*")):
            name = repo_dir.name[len("models--") :].replace("--", "/")
            snapshot = _hub_snapshot(name)
            if snapshot is not None:
                entries.append(ModelEntry(name, "hub-cache", str(snapshot)))
    runs = settings.runs_dir()
    if runs.is_dir():
        for run in sorted(runs.iterdir()):
            # Unfinished runs live under a dotted temporary name until they are renamed.
            if run.is_dir() and not run.name.startswith(".") and _has_model_files(run):
                entries.append(ModelEntry(run.name, "run", str(run)))
                entries += [ModelEntry(f"{run.name}@{step}", "checkpoint", str(checkpoint_folder(run, step)))
                            for step in kept_steps(run)]
    heads = artefacts.heads_dir()
    if heads.is_dir():
        for folder in sorted(heads.iterdir()):
            if folder.is_dir() and not folder.name.startswith(".") and _has_model_files(folder):
                entries.append(ModelEntry(folder.name, "fitted-head", str(folder), artefacts.fitted_on(folder),
                                          artefacts.head_warning(folder) or ""))
    data_models = settings.data_dir() / "models"
    if data_models.is_dir():
        for folder in sorted(data_models.iterdir()):
            if _has_model_files(folder):
                entries.append(ModelEntry(folder.name, "local", str(folder)))
    return entries


def _available_names() -> str:
    names = [e.name for e in available_models()]
    return ", ".join(names) if names else "none"


def hub_reachable(timeout: float = HUB_CONNECT_TIMEOUT_S) -> bool:
    """A TCP connect to the hub, bounded in time (DNS included), or False when HF_HUB_OFFLINE is set."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return False
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    host, port = url.hostname, url.port or (443 if url.scheme == "https" else 80)

    def connect() -> bool:
        with socket.create_connection((host, port), timeout=timeout):
            return True

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(connect).result(timeout=timeout)
    except Exception:
        return False
    finally:
        pool.shutdown(wait=False)


def needs_download_message(ref: str) -> str:
    return (f"Model '{ref}' needs a download: it is not in {settings.cache_dir()} and the Hugging Face hub is "
            f"unreachable (offline?). Models available locally: {_available_names()}. "
            f"With internet, run: python -m core download {ref}")


def looks_like_path(ref: str) -> bool:
    """A folder path rather than a hub id ("name" or "org/name"): absolute, ./ ../ ~, a backslash, a drive
    letter, or more than one slash. "org/name" stays a hub id even if no such folder exists."""
    ref = ref.strip()
    return (ref.startswith(("/", "./", "../", "~", ".\\", "..\\")) or "\\" in ref or ref.count("/") > 1
            or (len(ref) > 1 and ref[1] == ":") or ref in (".", ".."))


_hub_check: dict[str, float | bool] = {}
_hub_check_lock = threading.Lock()


def hub_reachable_recently(max_age_s: float = HUB_CHECK_MAX_AGE_S) -> bool:
    """hub_reachable(), remembered for max_age_s (HF_HUB_OFFLINE is read every time)."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return False
    with _hub_check_lock:
        if time.monotonic() - float(_hub_check.get("at", float("-inf"))) > max_age_s:
            _hub_check.update(at=time.monotonic(), up=hub_reachable())
        return bool(_hub_check["up"])


@dataclass(frozen=True)
class Availability:
    """Whether a model can be loaded now, without trying: `reason` says why not (empty when it can)."""

    ref: str
    loadable: bool
    # "run", "local", "hub-cache", "hub" (downloads on first use); not loadable: "needs-download" (a hub id, the hub
    # unreachable) or "unavailable" (a missing folder, an unsupported or pickled model)
    source: str
    reason: str = ""
    summary: str = ""  # the reason in a line, for a narrow place such as the sidebar (the reason when it is short)


def availability(ref: str, hub_up: Callable[[], bool] | None = None) -> Availability:
    """The cheap "loadable now" check behind every model the app suggests: a folder with config.json and
    safetensors of a supported family (files only, no weights read), or a hub id when the hub answers.
    hub_up: the hub check (default hub_reachable_recently)."""
    try:
        source, folder = resolve(ref)
    except ModelUnavailable as err:
        return Availability(ref, False, "unavailable", str(err))
    if folder is None:
        if (hub_up or hub_reachable_recently)():
            return Availability(ref, True, "hub")
        return Availability(ref, False, "needs-download", needs_download_message(ref),
                            f"'{ref}' needs a download and the hub is unreachable. With internet: "
                            f"python -m core download {ref}")
    try:
        _check_architecture(folder, ref)
    except (ModelUnavailable, OSError, ValueError) as err:
        return Availability(ref, False, "unavailable", str(err))
    return Availability(ref, True, source)


# Which local model a first run opens on when the default cannot load: a pretrained encoder before a fine-tuned
# run (the pages explain what *BERT* does; a run is a classifier built on one), downloads before the data folder.
START_SOURCE_ORDER = ("hub-cache", "local", "run")


@dataclass(frozen=True)
class StartModel:
    """The model a new session opens on; `notice` (one line) is set when it is not the default."""

    model: str
    default: str
    notice: str = ""

    @property
    def fell_back(self) -> bool:
        return self.model != self.default


def choose_start_model(default: str, default_available: Availability, local: Sequence[ModelEntry]) -> StartModel:
    """The default when it loads now, else the best local model (START_SOURCE_ORDER, then the list's order),
    else the default anyway (its page then says what to do)."""
    if default_available.loadable or not local:
        return StartModel(default, default)
    best = min(local, key=lambda e: START_SOURCE_ORDER.index(e.source) if e.source in START_SOURCE_ORDER
               else len(START_SOURCE_ORDER))
    kind = {"hub-cache": "downloaded earlier", "local": "from the data folder", "run": "a fine-tuned run"}.get(best.source, best.source)
    if default_available.source == "needs-download":
        notice = f"Offline: {default} needs a download, so this opened on {best.name} ({kind})."
    else:
        notice = f"{default} cannot load ({default_available.reason.split('. ')[0]}), so this opened on {best.name} ({kind})."
    return StartModel(best.name, default, notice)


def start_model(hub_up: Callable[[], bool] | None = None) -> StartModel:
    """choose_start_model for this computer now: the configured default and the models on disk."""
    default = settings.default_model()
    local = [e for e in available_models() if availability(e.name, hub_up).loadable]
    return choose_start_model(default, availability(default, hub_up), local)


def resolve(ref: str) -> tuple[str, Path | None]:
    """(source, folder) for a reference that is on disk, or ("hub", None) for a hub id not cached yet."""
    ref = ref.strip()
    if not ref:
        raise ModelUnavailable("No model given. Pick one from the list or type a hub id such as bert-base-uncased.")
    as_path = Path(ref).expanduser()
    if as_path.is_dir():
        if not (as_path / "config.json").is_file():
            raise ModelUnavailable(f"Folder '{ref}' has no config.json, so it is not a saved model.")
        return "local", as_path
    if looks_like_path(ref):
        # A path is never a hub id: "download it" would be the wrong advice.
        what = "is a file, not a model folder" if as_path.exists() else "does not exist"
        raise ModelUnavailable(f"No such folder: {ref} ({what}). Give the folder that holds config.json and "
                               f"*.safetensors, or pick a model from the list.")
    run = settings.runs_dir() / ref
    if run.is_dir() and not ref.startswith("."):
        return "run", run
    checkpoint = _run_checkpoint(ref)
    if checkpoint is not None:
        return "checkpoint", checkpoint
    head = artefacts.heads_dir() / ref
    if head.is_dir() and not ref.startswith(".") and _has_model_files(head):
        return "fitted-head", head
    data_model = settings.data_dir() / "models" / ref
    if data_model.is_dir() and _has_model_files(data_model):
        return "local", data_model
    snapshot = _hub_snapshot(ref)
    if snapshot is not None:
        return "hub-cache", snapshot
    return "hub", None


def model_version(ref: str) -> tuple:
    """What tells two loads of `ref` apart: the folder it resolves to and when its config was written (a run
    deleted and trained again under the same name is a new model). Hub ids not on disk give ("hub", ref)."""
    try:
        source, folder = resolve(ref)
    except ModelUnavailable:
        return ("unavailable", ref)
    if folder is None:
        return (source, ref)
    config = folder / "config.json"
    return (source, str(folder.resolve()), config.stat().st_mtime_ns if config.is_file() else 0)


def model_num_layers(ref: str) -> int:
    """Transformer layers of a model from its config alone (no weights loaded): "freeze the last layer" needs it."""
    _, folder = resolve(ref)
    folder = folder if folder is not None else download(ref)
    config = json.loads((folder / "config.json").read_text())
    layers = config.get("num_hidden_layers", config.get("n_layers"))
    if not layers:
        raise ModelUnavailable(f"Model '{ref}' states no layer count in its config.json.")
    return int(layers)


def download(ref: str) -> Path:
    """Fetch a hub model (safetensors and tokenizer files only) into the cache; return its folder."""
    source, folder = resolve(ref)
    if folder is not None:
        return folder
    if not hub_reachable():
        raise ModelUnavailable(needs_download_message(ref))
    from huggingface_hub import snapshot_download

    try:
        path = Path(
            snapshot_download(ref, cache_dir=str(settings.hub_cache_dir()), allow_patterns=HUB_FILE_PATTERNS)
        )
    except Exception as err:  # RepositoryNotFound, gated repos, HTTP errors
        raise ModelUnavailable(f"Could not download '{ref}' from the hub: {err}") from err
    if not any(path.glob("*.safetensors")):
        raise ModelUnavailable(
            f"'{ref}' publishes no safetensors weights; BERT Lens loads only safetensors (pickled .bin "
            "weights can run code on load)."
        )
    return path


def _check_architecture(folder: Path, ref: str) -> None:
    config = json.loads((folder / "config.json").read_text())
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES or config.get("is_encoder_decoder"):
        raise ModelUnavailable(
            f"'{ref}' is a '{model_type}' model; BERT Lens reads encoder models of these families: "
            f"{', '.join(sorted(SUPPORTED_MODEL_TYPES))}."
        )
    check_model_size(config, ref)
    if not any(folder.glob("*.safetensors")):
        raise ModelUnavailable(f"'{ref}' has no .safetensors weights in {folder}; only safetensors are loaded.")


# Bytes per element of each safetensors dtype, to check a header's offsets against its shapes.
SAFETENSORS_DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2,
                           "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
# A real header is a few hundred KB at most (one entry per tensor); the format itself caps it at 100 MB.
MAX_SAFETENSORS_HEADER = 100 * 2**20


def safetensors_problem(file: Path) -> str | None:
    """What is wrong with a .safetensors file's header, read before safetensors or transformers parse it (their
    errors are tracebacks from Rust, e.g. "header too large" for a length of 2^62); None when it is sound: an
    8-byte little-endian length, that many bytes of JSON, each tensor's [begin, end) inside the data and as long as
    its shape and dtype say, the data covered exactly."""
    try:
        size = file.stat().st_size
        with open(file, "rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                return f"is {size} bytes long, too short for a safetensors header"
            length = int.from_bytes(head, "little")
            if length > min(size - 8, MAX_SAFETENSORS_HEADER):
                return f"states a header of {length:,} bytes but the file has {size:,} (truncated or not safetensors)"
            text = handle.read(length).decode("utf-8")
    except UnicodeDecodeError:
        return "has a header that is not UTF-8 text"
    if nesting_problem(text):
        return "has a header that is not a safetensors header (nested or long numbers)"
    try:
        header = json.loads(text)
    except ValueError as err:
        return f"has a header that is not JSON ({err})"
    if not isinstance(header, dict):
        return "has a header that is not a JSON object"
    data_size, covered = size - 8 - length, 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            begin, end = (int(x) for x in entry["data_offsets"])
            count = 1
            for dim in entry["shape"]:
                if int(dim) < 0:
                    raise ValueError
                count *= int(dim)
            width = SAFETENSORS_DTYPE_BYTES[entry["dtype"]]
        except (KeyError, TypeError, ValueError):
            return f"has a malformed entry for tensor '{name}'"
        if not 0 <= begin <= end <= data_size:
            return (f"has tensor '{name}' at bytes {begin:,}-{end:,} but holds only {data_size:,} bytes of data "
                    "(truncated or corrupt)")
        if end - begin != count * width:
            return f"has tensor '{name}' of {end - begin:,} bytes where its shape and dtype need {count * width:,}"
        covered = max(covered, end)
    if covered != data_size:
        return f"holds {data_size:,} bytes of data but its tensors cover {covered:,} (truncated or corrupt)"
    return None


def check_weight_files(folder: Path, ref: str) -> None:
    """ModelUnavailable naming the file and what is wrong with the first unsound .safetensors file of a folder."""
    for file in sorted(Path(folder).glob("*.safetensors")):
        problem = safetensors_problem(file)
        if problem:
            raise ModelUnavailable(f"Cannot load '{ref}': {file} {problem}.")


def check_finite_weights(model, ref: str) -> None:
    """ModelUnavailable naming the first parameter holding NaN or infinity: every number computed from it would be
    NaN, shown as a blank chart or a null in JSON, with no hint why. Parameters only: a buffer may hold -inf on
    purpose (an attention mask). One pass over the weights, about 0.15 s for MiniLM-L6 on one CPU thread."""
    import torch

    for name, tensor in model.named_parameters():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise ModelUnavailable(f"Cannot use '{ref}': its weights hold NaN or infinity ({bad:,} of "
                                   f"{tensor.numel():,} values of tensor '{name}'); the checkpoint is corrupt.")


# Where a family's config.json states each size (BERT's names first; DistilBERT's n_layers / dim / hidden_dim).
_SIZE_FIELDS = {
    "layers": ("num_hidden_layers", "n_layers", "num_layers"),
    "hidden": ("hidden_size", "dim", "d_model"),
    "intermediate": ("intermediate_size", "hidden_dim", "ffn_dim"),
    "vocabulary": ("vocab_size",),
    "positions": ("max_position_embeddings",),
    "token types": ("type_vocab_size",),
    "embedding width": ("embedding_size",),
}


def _config_size(config: dict, what: str, default: int, ref: str) -> int:
    for name in _SIZE_FIELDS[what]:
        if name in config:
            value = config[name]
            # bool is an int in Python: `true` layers is a broken config, not one layer
            if value is None:
                return default
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ModelUnavailable(f"'{ref}': config.json's {name} must be a whole number of at least 0; "
                                       f"got {str(value)[:40]!r}.")
            return value
    return default


def implied_parameters(config: dict, ref: str = "model") -> tuple[int, str]:
    """(parameters, how they were counted) that a config.json implies, read before anything is built.

    Embeddings (vocabulary + positions + token types) x their width, plus per layer the attention's four
    hidden x hidden projections and the feed-forward's two hidden x intermediate ones; biases and layer norms
    (under 0.2 % of BERT-base) are left out. BERT-base: 108.8 M counted, 109.5 M real. ALBERT shares one layer's
    weights among all layers, so its count is an upper bound there."""
    layers = _config_size(config, "layers", 12, ref)
    hidden = _config_size(config, "hidden", 768, ref)
    intermediate = _config_size(config, "intermediate", 4 * hidden, ref)
    vocabulary = _config_size(config, "vocabulary", 30522, ref)
    positions = _config_size(config, "positions", 512, ref)
    types = _config_size(config, "token types", 2, ref)
    width = _config_size(config, "embedding width", hidden, ref)
    total = (vocabulary + positions + types) * width + layers * (4 * hidden * hidden + 2 * hidden * intermediate)
    how = (f"{layers} layers x hidden {hidden}, intermediate {intermediate}, vocabulary {vocabulary}")
    return total, how


def count_text(n: int) -> str:
    """A parameter count as people quote it: "110.1 M", "4.0 B", "7.1 T"; a count too large for a float as 10^k."""
    if n >= 10 ** 15:
        return f"about 10^{len(str(n)) - 1}"
    for size, unit in ((10 ** 12, "T"), (10 ** 9, "B"), (10 ** 6, "M"), (10 ** 3, "K")):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return str(n)


def check_model_size(config: dict, ref: str) -> None:
    """Refuse, before a tensor is allocated, a model whose config implies more parameters than
    settings.max_model_parameters() (BERTLENS_MAX_MODEL_PARAMETERS, default 4 B): a config.json naming 100,000
    layers would otherwise be built layer by layer for minutes until memory ran out."""
    limit = settings.max_model_parameters()
    total, how = implied_parameters(config, ref)
    if total > limit:
        raise ModelUnavailable(
            f"'{ref}' is too large: its config.json implies {count_text(total)} parameters ({how}); BERT Lens loads "
            f"models up to {count_text(limit)} parameters (set BERTLENS_MAX_MODEL_PARAMETERS to change that).")


# Where each family keeps its masked-word head in a checkpoint (safetensors key prefixes; a checkpoint saved from
# the bare model or a classifier has none of them). ELECTRA's *discriminator* is "ElectraForPreTraining" with no
# MLM head, which is why the keys decide, not the config's architectures.
MLM_HEAD_PREFIXES = {
    "bert": ("cls.predictions.",),
    "roberta": ("lm_head.",), "xlm-roberta": ("lm_head.",), "camembert": ("lm_head.",), "mpnet": ("lm_head.",),
    "distilbert": ("vocab_transform.", "vocab_projector."),
    "albert": ("predictions.",),
    "electra": ("generator_predictions.", "generator_lm_head."),
    # ModernBERT's classifiers have a "head." block too (pooled -> dense -> norm); only the MLM has a decoder.
    "modernbert": ("decoder.",),
    # DeBERTa-v2/v3: which head the model class builds depends on config.legacy (has_mlm_head): BERT's `cls`
    # (legacy, the default) or `lm_predictions`. DeBERTa-v3's released checkpoints store `lm_predictions.*` with no
    # "legacy": false, so transformers would build a fresh random `cls` head: they count as having none.
    "deberta-v2": ("cls.predictions.",),
}
MLM_HEAD_PREFIXES_NOT_LEGACY = {"deberta-v2": ("lm_predictions.",)}
# The nearest public model with an MLM head, per family, for the "this model has none" message.
MLM_SUGGESTIONS = {
    "bert": "bert-base-uncased", "roberta": "roberta-base", "xlm-roberta": "xlm-roberta-base",
    "camembert": "camembert-base", "mpnet": "microsoft/mpnet-base", "distilbert": "distilbert-base-uncased",
    "albert": "albert-base-v2", "electra": "google/electra-small-generator",
    "modernbert": "answerdotai/ModernBERT-base",
}


def checkpoint_keys(folder: Path) -> list[str]:
    """Tensor names of every .safetensors file in a folder (headers only, no weights read)."""
    keys: list[str] = []
    for file in sorted(Path(folder).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as f:
            keys.extend(f.keys())
    return keys


def has_mlm_head(folder: Path) -> bool:
    """Whether a saved model holds the weights of its family's masked-word head."""
    config = json.loads((Path(folder) / "config.json").read_text())
    model_type = config.get("model_type")
    prefixes = MLM_HEAD_PREFIXES.get(model_type)
    if model_type in MLM_HEAD_PREFIXES_NOT_LEGACY and config.get("legacy", True) is False:
        prefixes = MLM_HEAD_PREFIXES_NOT_LEGACY[model_type]
    if not prefixes:
        return False
    return any(key.startswith(prefixes) for key in checkpoint_keys(folder))


def mlm_suggestion(model_type: str | None) -> str:
    return MLM_SUGGESTIONS.get(model_type or "", "bert-base-uncased")


# The models loaded inside `reusing_loads()`, by load_model's arguments; None outside one.
_REUSED: ContextVar[dict | None] = ContextVar("bertlens_reused_loads", default=None)


# transformers 5's from_pretrained swaps torch.nn.init's functions (and those torch.nn.modules.* imported) for
# no-ops process-wide while it loads (transformers/initialization.py: no_init_weights), so a layer built with
# fresh weights in another thread meanwhile (a job's classifier head, a fitted head) kept torch.empty's leftovers.
# Every load and every construction of fresh weights holds this one lock (re-entrant: a load may build).
WEIGHTS_LOCK = threading.RLock()


@contextmanager
def fresh_weights() -> Iterator[None]:
    """Hold while building modules whose weights are initialised (or while loading, which swaps the init
    functions): no other thread's load is inside transformers' no_init_weights meanwhile."""
    with WEIGHTS_LOCK:
        yield


@contextmanager
def reusing_loads() -> Iterator[None]:
    """Within it (in this thread), load_model returns the model it already loaded for the same arguments: a study
    run once per seed loads its model once. Safe because analyses never change a loaded model (hooks go through
    the adapter and are removed on exit; training loads its own copy)."""
    token = _REUSED.set({})
    try:
        yield
    finally:
        _REUSED.reset(token)


def load_model(ref: str | None = None, *, device: str | None = None, attention: str = "eager",
               masked_lm: bool = False) -> LoadedModel:
    """Load an encoder for analysis.

    ref: a hub id (default: settings.default_model()), a local folder, or a run name under models_cache/runs.
    attention: "eager" returns attention probabilities; "sdpa" is faster but returns none.
    masked_lm: when the checkpoint has an MLM head, load the masked-word model (AutoModelForMaskedLM) and use its
    own encoder as `model`: one load serves both. That encoder has no pooler (transformers builds the MLM
    classes with add_pooling_layer=False); nothing in BERT Lens reads the pooler. Without a head, as before and
    `masked_lm` stays None.
    """
    reused = _REUSED.get()
    key = ((ref or settings.default_model()).strip(), device, attention, masked_lm)
    if reused is not None and key in reused:
        return reused[key]
    loaded = _load_model(*key)
    if reused is not None:
        reused[key] = loaded
    return loaded


def _load_model(ref: str, device: str | None, attention: str, masked_lm: bool) -> LoadedModel:
    import torch
    from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer

    source, folder = resolve(ref)
    if folder is None:
        folder = download(ref)
    _check_architecture(folder, ref)
    check_weight_files(folder, ref)
    if json.loads((folder / "config.json").read_text()).get("model_type") in EAGER_ONLY_MODEL_TYPES:
        attention = "eager"
    device = device or pick_device()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
        with_head = masked_lm and has_mlm_head(folder)
        with fresh_weights():
            loaded = (AutoModelForMaskedLM if with_head else AutoModel).from_pretrained(
                str(folder),
                dtype=torch.float32,
                attn_implementation=attention,
                use_safetensors=True,
                trust_remote_code=False,
            )
    except (OSError, ValueError, SafetensorError) as err:
        raise ModelUnavailable(f"Could not load '{ref}' from {folder}: {err}") from err
    check_finite_weights(loaded, ref)
    if not getattr(tokenizer, "is_fast", False):
        raise ModelUnavailable(f"'{ref}' has no fast tokenizer (tokenizer.json); word alignment needs one.")
    if getattr(loaded.config, "type_vocab_size", 1) == 0 and "token_type_ids" in tokenizer.model_input_names:
        # A model without a token-type vocabulary (DeBERTa-v3) has no segment embeddings: every front end builds its
        # inputs from model_input_names, so none makes or shows segment ids the model never reads.
        tokenizer.model_input_names = [n for n in tokenizer.model_input_names if n != "token_type_ids"]
    loaded.to(device).eval()
    model = loaded.base_model if with_head else loaded
    return LoadedModel(ref=ref, path=str(folder), source=source, model=model, tokenizer=tokenizer, device=device,
                       masked_lm=loaded if with_head else None)
