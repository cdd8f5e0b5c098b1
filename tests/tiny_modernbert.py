"""A tiny random ModernBertForMaskedLM with a byte-level BPE tokenizer built here (no download), saved as safetensors,
for the ModernBERT tests: three layers alternating global, local (sliding window of 4 tokens, shorter than the test
sentences, so the local layer's pattern is banded) and global attention; GeGLU feed-forward; no token type ids."""

from __future__ import annotations

from pathlib import Path

# The BPE is trained on these sentences (plus the byte alphabet), so every test sentence tokenizes into whole words
# and a few pieces; "[MASK]" and the other specials are added tokens.
CORPUS = (
    "The cat sat on the mat. The dog ran in the park. A man and a woman were at the river bank. "
    "He put money in the bank. She is a doctor. He is a nurse. The girl saw the boy with a telescope. "
    "It was unhappy. They walked to the house under the tree. The keys to the cabinet are on the table. "
    "This movie was great! The food was terrible, and the service was slow? I loved it."
).split(". ")
SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
# Global attention every second layer: layers 0 and 2 global, layer 1 local with a 4-token window.
LOCAL_WINDOW = 4


def make_tiny_modernbert(folder: Path, *, layers: int = 3, heads: int = 4, hidden: int = 32, seed: int = 0,
                         positions: int = 64, masked_lm: bool = True) -> Path:
    """The model saved in `folder`; masked_lm=False saves the bare encoder (ModernBertModel, no MLM head)."""
    import torch
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import ModernBertConfig, ModernBertForMaskedLM, PreTrainedTokenizerFast

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE(unk_token="[UNK]"))
    # As ModernBERT's own tokenizer.json: byte-level pre-tokenizer without a prefix space, [CLS] A [SEP] (B [SEP]).
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(CORPUS, trainer=trainer)
    cls, sep = bpe.token_to_id("[CLS]"), bpe.token_to_id("[SEP]")
    bpe.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    # As ModernBERT's: "[MASK]" takes the space before it ("on the [MASK]" has no lone "Ġ" piece)
    bpe.add_special_tokens([AddedToken("[MASK]", lstrip=True, special=True)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
        mask_token=AddedToken("[MASK]", lstrip=True, special=True), model_max_length=positions, model_input_names=["input_ids", "attention_mask"])
    tokenizer.save_pretrained(folder)
    config = ModernBertConfig(
        vocab_size=bpe.get_vocab_size(), hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
        num_attention_heads=heads, max_position_embeddings=positions, global_attn_every_n_layers=2,
        local_attention=LOCAL_WINDOW, pad_token_id=bpe.token_to_id("[PAD]"), cls_token_id=cls, bos_token_id=cls,
        sep_token_id=sep, eos_token_id=sep)
    torch.manual_seed(seed)
    model = ModernBertForMaskedLM(config)
    # Random init leaves the decoder's bias at zero and the guesses near uniform; spread them so top-k is decisive.
    # Random init's small q and k give near-uniform attention; scaled up, each head's pattern has a shape.
    with torch.no_grad():
        model.decoder.bias.normal_(0, 2.0)
        for layer in model.model.layers:
            layer.attn.Wqkv.weight.mul_(8.0)
    (model if masked_lm else model.model).save_pretrained(folder, safe_serialization=True)
    return folder


if __name__ == "__main__":  # python -m tests.tiny_modernbert FOLDER: for a manual look at the pages
    import sys

    print(make_tiny_modernbert(Path(sys.argv[1])))
