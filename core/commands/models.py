"""`models`, `download` and `encode`: the foundation's subcommands."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from core import validation
from core.commands import add_json_arguments, add_model_argument
from core.model.encoding import encode
from core.files import DiskFull, atomic_path
from core.model.artefacts import list_artefacts
from core.model.loading import FAMILY_NAMES, available_models, download, load_model


def register(subparsers) -> None:
    p = subparsers.add_parser("models", help="list models that load offline",
                              description=f"Models that load offline. BERT Lens reads encoders of these families: {FAMILY_NAMES}.")
    add_json_arguments(p, 'one JSON object, {"models": [{"name", "source", "path", "fitted_on", "warning"}, ...], "artefacts": [{"name", "kind", "model", "path"}, ...], "families": "..."}, instead of a table')
    p.set_defaults(func=run_models)

    p = subparsers.add_parser("download", help="fetch a hub model into models_cache/ ahead of time")
    p.add_argument("ref", help="hub id, e.g. bert-base-uncased")
    p.set_defaults(func=run_download)

    p = subparsers.add_parser("encode", help="one forward pass; arrays to an .npz file")
    add_model_argument(p)
    p.add_argument("--text", required=True, help="sentence A")
    p.add_argument("--text-b", default=None, help="sentence B (optional)")
    p.add_argument("--out", required=True, type=validation.output_file, help="output .npz path")
    p.set_defaults(func=run_encode)


def run_models(args) -> int:
    entries = available_models()
    saved = list_artefacts()
    if args.json:
        validation.dump_json({"models": [e.__dict__ for e in entries], "artefacts": [a.__dict__ for a in saved],
                              "families": FAMILY_NAMES}, args.out)
    else:
        for e in entries:
            print(f"{e.name}\t{e.source}\t{e.path}" + (f"\t(fitted on {e.fitted_on})" if e.fitted_on else "")
                  + (f"\tWARNING: {e.warning}" if e.warning else ""))
        for a in saved:
            print(f"{a.name}\t{a.kind}\t{a.path}\t(reads {a.model})")
        if not entries:
            print("no models available offline; with internet: python -m core download bert-base-uncased")
        print(f"families BERT Lens reads: {FAMILY_NAMES}")
    return 0


def run_download(args) -> int:
    print(download(args.ref))
    return 0


def run_encode(args) -> int:
    # numpy's own rule for a name without the suffix, applied here because the temporary name has another suffix.
    out = Path(args.out if args.out.endswith(".npz") else args.out + ".npz")
    if out.is_dir():
        raise ValueError(f"--out {out} is a folder; give a file name such as {out / 'encoding.npz'}")
    if not out.parent.is_dir():
        raise ValueError(f"--out {out}: the folder {out.parent} does not exist")
    lm = load_model(args.model)
    item = (args.text, args.text_b) if args.text_b is not None else args.text
    enc = encode(lm, item)
    try:
        with atomic_path(out) as tmp, open(tmp, "wb") as handle:
            np.savez_compressed(handle, attentions=enc.attentions, hidden_states=enc.hidden_states,
                                tokens=np.array(enc.tokens), segment_ids=enc.segment_ids, word_ids=enc.word_ids)
    except DiskFull as err:  # "disk full: could not write OUT; ..." already names the file
        raise ValueError(f"{err}; nothing was written") from None
    except OSError as err:
        raise ValueError(f"cannot write {out}: {err.strerror or err}; nothing was written") from None
    note = f" (truncated: {enc.n_truncated} tokens dropped)" if enc.truncated else ""
    print(f"{out}: {enc.n_tokens} tokens, attentions {enc.attentions.shape}{note}")
    return 0
