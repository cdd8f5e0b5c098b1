"""What fine-tuning changes, declared once (core.contract): `compare` (RSA and linear CKA per layer between two
models, core.analyses.similarity) and `probe` (Hewitt & Manning's structural probe per layer, core.analyses.probe).

This module stays light (no numpy, torch or transformers, nothing of the analyses it declares): core.views.finetune
makes the page's URL parameters from these declarations, and the view registry must load without torch. The runs
live beside their analyses (similarity.run_compare, probe.run_probe), named here as "module:function".
"""

from __future__ import annotations

from dataclasses import dataclass

from core.contract import Analysis, setting
from core.protocols import DEFAULT as DEFAULT_PROTOCOL

SIMILARITY_PROTOCOLS = (DEFAULT_PROTOCOL, "merchant")
PROBE_PROTOCOLS = (DEFAULT_PROTOCOL, "hewitt-manning")
DEFAULT_MAX_WORDS = 1500
COMPARE_LIMIT = 500  # sentences compare reads from its corpus by default
SMALLEST_RATE = 1e-12  # a learning rate must be positive; the bounds of a setting are inclusive


@dataclass(frozen=True)
class CompareSettings:
    max_words: int = setting(DEFAULT_MAX_WORDS, "words compared, a seeded random sample of the words read; memory "
                             "grows with its square", low=1)
    seed: int = setting(0, "seed of the corpus sample and of the word sample", low=0, url="sample_seed")
    # The page's link carries the protocol as its "Paper protocol (Merchant)" switch (similarity_protocol).
    protocol: str = setting(DEFAULT_PROTOCOL, "bertlens: random whole sentences; merchant: words sampled uniformly "
                            "(Merchant et al. 2020)", choices=SIMILARITY_PROTOCOLS, url=None)


@dataclass(frozen=True)
class ProbeRunSettings:
    """The probe's settings as every front end offers them; `probe_settings` turns them into the trainer's
    core.analyses.probe.ProbeSettings for a model (a protocol decides what is left out: rank, epochs)."""

    layers: str = setting("all", "comma-separated layers, 0 = embeddings (e.g. '0,6,12'), or 'all'", url=None)
    protocol: str = setting(DEFAULT_PROTOCOL, "bertlens or hewitt-manning: full rank, up to 40 epochs with early "
                            "stop, H&M's PTB punctuation tags left out of UUAS", choices=PROBE_PROTOCOLS, url=None)
    rank: int = setting(None, "rank K of the probe (left out: 128; hewitt-manning: the hidden size)", type="int", low=1,
                        url=None)
    epochs: int = setting(None, "training epochs (left out: 10; hewitt-manning: at most 40)", type="int", low=1, url=None)
    lr: float = setting(1e-3, "Adam learning rate (as H&M)", low=SMALLEST_RATE, url=None)
    seed: int = setting(0, "seed of the data split, the subsets and the probe's initialisation", low=0, url=None)
    random_init: bool = setting(False, "probe a random-initialised copy of the model (the control)", url=None)


def probe_layer_numbers(text: str, num_layers: int | None = None) -> list[int] | None:
    """The layers setting for a model of num_layers layers: None for all, else the numbers (0 = embeddings);
    ValueError naming the option when one is not a layer of it (num_layers None: only the spelling is checked,
    before a model loads)."""
    if text.strip().lower() == "all":
        return None
    try:
        layers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--layers {text!r}: give comma-separated numbers such as 0,6,12, or 'all'") from None
    bad = [layer for layer in layers if layer < 0 or num_layers is not None and layer > num_layers]
    if bad or not layers:
        raise ValueError(f"--layers {text!r}: " + ("give at least one layer" if not layers or num_layers is None
                                                  else f"this model has layers 0 to {num_layers}"))
    return layers


ANALYSES = (
    Analysis(name="compare", view="finetune", command="compare", lens="compare", settings=CompareSettings,
             run="core.analyses.similarity:run_compare", charts="core.charts.finetune:compare_charts", title="Which layers changed", order=10,
             summary="RSA and linear CKA between two models, layer by layer"),
    Analysis(name="probe", view="finetune", command="probe", lens="probe", settings=ProbeRunSettings,
             run="core.analyses.probe:run_probe",
             charts="core.charts.finetune:probe_charts", title="Did syntax survive", order=11,
             summary="structural (distance) probe per layer on a CoNLL-U treebank: UUAS and DSpr"),
)
COMPARE, PROBE = ANALYSES
