"""Small task files for runs that must (or must not) learn: tiny random BERTs fine-tuned on them in seconds."""

from __future__ import annotations

import random
from pathlib import Path


def learned_and_noise(folder: Path, seed: int) -> tuple[Path, Path]:
    """learned.csv: the animal named in the text (learnable); noise.csv: a label that ignores the text, about 70 %
    of them 'a' (nothing to learn). 200 rows each."""
    rng = random.Random(seed)
    learned, noise = ["text,label"], ["text,label"]
    for _ in range(200):
        animal = rng.choice(["cat", "dog"])
        learned.append(f"the {animal} sat on the mat,{animal}")
        noise.append(f"the {animal} sat on the mat,{'a' if rng.random() < 0.7 else 'b'}")
    paths = folder / "learned.csv", folder / "noise.csv"
    for path, lines in zip(paths, (learned, noise)):
        path.write_text("\n".join(lines) + "\n")
    return paths
