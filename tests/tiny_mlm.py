"""A tiny random BertForMaskedLM (with the MLM head's weights in its safetensors) over tests.conftest's vocabulary,
for the Masked words tests: unit, integration, AppTest and the browser screenshot."""

from __future__ import annotations

from pathlib import Path


def make_tiny_mlm(folder: Path, *, layers: int = 2, heads: int = 4, hidden: int = 32, seed: int = 0) -> Path:
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    from tests.conftest import TINY_VOCAB

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {piece: i for i, piece in enumerate(TINY_VOCAB)}
    BertTokenizerFast(vocab=vocab, do_lower_case=True, model_max_length=64).save_pretrained(folder)
    config = BertConfig(vocab_size=len(TINY_VOCAB), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=hidden * 2, max_position_embeddings=64)
    torch.manual_seed(seed)
    model = BertForMaskedLM(config)
    # Random init leaves the head's bias at zero and the guesses near uniform; spread them so top-k is decisive.
    with torch.no_grad():
        model.cls.predictions.bias.normal_(0, 2.0)
    model.save_pretrained(folder, safe_serialization=True)
    return folder



def make_layered_mlm(folder: Path, *, layers: int = 3, seed: int = 3) -> Path:
    """make_tiny_mlm whose guesses depend on the hidden state and differ from layer to layer (the stock one's head
    bias swamps them): the tied word embeddings scaled up, the head's bias zeroed, each layer's output outweighing
    the residual it adds to. For the layer lens's tests and screenshot."""
    import torch
    from transformers import BertForMaskedLM

    make_tiny_mlm(folder, layers=layers, seed=seed)
    model = BertForMaskedLM.from_pretrained(folder)
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.weight.mul_(60.0)
        model.cls.predictions.bias.zero_()
        for layer in model.bert.encoder.layer:
            layer.output.dense.weight.mul_(20.0)
    model.save_pretrained(folder, safe_serialization=True)
    return Path(folder)

if __name__ == "__main__":  # python -m tests.tiny_mlm FOLDER: for a manual look at the page
    import sys

    print(make_tiny_mlm(Path(sys.argv[1])))
