"""Small JSON files that several processes read while one writes: written whole or not at all."""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_json_atomic(path: Path, data) -> None:
    """Readers (a page polling a status file) never see half a file: write aside, then rename over."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)


def read_json(path: Path):
    """The file's JSON, or None when it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
