"""One layer numbering for everything a person reads or types (issue 48): 0 = the embeddings (hidden_states[0]),
1..L = the transformer layers, so layer l's attention, heads and feed-forward block write hidden_states[l].

Arrays keep their own indexing (attentions[i], a [layer, head] grid's row i, a patching row i: transformer layer
i + 1); code converts only where a number is shown (chart data and titles, captions, CLI output, JSON "layer" fields)
or typed (CLI --layer, URL params, widgets). The Python API (core.analyses, core.lens) keeps array indices, as
HuggingFace's `outputs.attentions[i]` does. Heads keep their bertviz numbering from 0 (from 1 only in the tables of
the Clark protocol, as in that paper)."""

from __future__ import annotations

EMBEDDINGS = 0
HIDDEN_AXIS = "layer (0 = embeddings)"  # charts over hidden_states[0..L]
BLOCK_AXIS = "layer (1 = first transformer layer)"  # charts over transformer layers only (heads, attention, patching)
LAYER_ARGUMENT_HELP = "1..L as on every chart: 1 = the first transformer layer (0, the embeddings, has no heads)"
# The freeze option of the fine-tuning and bias forms and their CLI flags: one wording, one numbering.
FREEZE_LABEL = "Freeze layers"
FREEZE_HELP = ("Layers kept fixed while training, numbered as on every chart: 0 = the embeddings, 1..L = the "
               "transformer layers; e.g. 12 or 0-6,12")


def shown(index: int) -> int:
    """The number a person reads for a transformer layer at array index `index` (0 -> layer 1)."""
    return int(index) + 1


def label(index: int) -> str:
    """A widget option's text for array index `index` (a select box's format_func must return text)."""
    return str(shown(index))


def index_of(number: int) -> int:
    """The array index of transformer layer `number` (1..L) as typed by a person."""
    return int(number) - 1


def head_name(index: int, head: int) -> str:
    """A head as printed in text: "L3 H5" for array index (2, 5), its layer shown 1..L."""
    return f"L{shown(index)} H{int(head)}"


def block_index(number: int, num_layers: int, what: str = "layer") -> int:
    """The array index of transformer layer `number` typed by a person; ValueError (the CLI's exit 2) naming the
    model's range when there is no such layer."""
    if not 1 <= int(number) <= num_layers:
        raise ValueError(f"{what} {number}: this model's transformer layers are 1..{num_layers} "
                         "(0 is the embeddings, which have no attention heads)")
    return index_of(number)


def default_head_layer(num_layers: int) -> int:
    """The array index of the layer a head's view opens on when none is chosen: the third transformer layer (index
    2, where BERT's heads already show clear patterns), or the last of a shallower model. The Attention heads page,
    the Masked words page, core.lens and the CLI all start here."""
    return min(int(num_layers) - 1, 2)


def head_title(index: int, heads) -> str:
    """The title of a head view: "Layer 3, head 5" / "Layer 3, heads 0, 2" for array index 2 (several heads are
    averaged)."""
    heads = [int(h) for h in heads]
    return f"Layer {shown(index)}, head{'s' if len(heads) > 1 else ''} {', '.join(map(str, heads))}"
