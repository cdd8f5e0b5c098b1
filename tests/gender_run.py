"""A tiny classification run whose label is the gender of the sentence's one gendered word (as
tests/integration/test_bias_experiment.py's fixture trains it), for the erasure tests: swapping that word flips its
prediction."""

from __future__ import annotations

import json
import random
from pathlib import Path


def make_gender_run(base_model: Path, folder: Path, name: str = "gender") -> tuple[str, list[str]]:
    """Fine-tune `base_model` on 400 generated sentences (the data file written in `folder`); (run name, texts)."""
    from core.training import Recipe, finetune
    from tests.integration import test_bias_experiment as bias_tests

    rng = random.Random(0)
    rows = []
    for _ in range(400):
        word = rng.choice(sorted(bias_tests.GENDERED))
        words = rng.sample(bias_tests.FILLER_WORDS, 5)
        words.insert(rng.randrange(6), word)
        rows.append((" ".join(words), bias_tests.GENDERED[word]))
    path = Path(folder) / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"text": t, "label": label}) + "\n" for t, label in rows))
    finetune(Recipe(model=str(base_model), task=str(path), run_name=name, epochs=4, lr=2e-3, batch_size=16,
                    max_length=32, cpu_threads=1))
    return name, [t for t, _ in rows]
