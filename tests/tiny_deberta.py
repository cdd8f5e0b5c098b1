"""A tiny random DebertaV2ForMaskedLM (DeBERTa-v3's layout: relative attention with c2p and p2c terms over a few
log-bucketed relative positions, no absolute position embeddings) with a SentencePiece-style Unigram tokenizer
built offline: words start with "▁", a few suffixes continue them. For the DeBERTa tests of every front end."""

from __future__ import annotations

from pathlib import Path

DEBERTA_WORDS = ("the a cat dog sat ran on in at to of and is was mat river bank money deposit water he she it they "
                 "man woman girl boy park house tree . , ? ! happy sad good bad").split()
DEBERTA_PIECES = ("s", "ed", "ing", "ly", "un")


def make_tiny_deberta(folder: Path, *, layers: int = 2, heads: int = 4, hidden: int = 32, seed: int = 0,
                      positions: int = 64, buckets: int = 8, type_vocab_size: int = 0) -> Path:
    """Saved as safetensors with a fast DebertaV2Tokenizer; the MLM head is the non-legacy one DeBERTa-v3 uses
    (lm_predictions, scoring against the word embeddings), its bias spread so top-k is decisive."""
    import torch
    from transformers import DebertaV2Config, DebertaV2ForMaskedLM, DebertaV2Tokenizer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = ([(token, 0.0) for token in specials] + [(f"▁{word}", -2.0) for word in DEBERTA_WORDS]
             + [(piece, -6.0) for piece in DEBERTA_PIECES] + [(c, -12.0) for c in "abcdefghijklmnopqrstuvwxyz"]
             + [("▁", -3.0)])
    DebertaV2Tokenizer(vocab=vocab, do_lower_case=True, split_by_punct=True,
                       model_max_length=positions).save_pretrained(folder)
    config = DebertaV2Config(
        vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=hidden * 2, max_position_embeddings=positions, relative_attention=True,
        pos_att_type=["p2c", "c2p"], position_buckets=buckets, max_relative_positions=positions,
        position_biased_input=False, norm_rel_ebd="layer_norm", share_att_key=True, type_vocab_size=type_vocab_size,
        legacy=False, pad_token_id=0)
    torch.manual_seed(seed)
    model = DebertaV2ForMaskedLM(config)
    with torch.no_grad():
        model.lm_predictions.lm_head.bias.normal_(0, 2.0)
        # Random init (std 0.02) gives near-uniform attention; larger projections and relative embeddings make every
        # term and head matter, so a wrong term, bucket or hook cannot hide below float error.
        model.deberta.encoder.rel_embeddings.weight.normal_(0.0, 1.0)
        for name, p in model.named_parameters():
            if any(part in name for part in ("query_proj.weight", "key_proj.weight", "value_proj.weight")):
                p.normal_(0.0, 0.3)
    model.save_pretrained(folder, safe_serialization=True)
    return folder


if __name__ == "__main__":  # python -m tests.tiny_deberta FOLDER: for a manual look at the pages
    import sys

    print(make_tiny_deberta(Path(sys.argv[1])))
