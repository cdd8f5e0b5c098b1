"""A tiny random XLM-R masked-word model whose tokenizer splits at spaces only and marks a word's start with "▁",
as a SentencePiece vocabulary does, so punctuation stays inside a word: its vocabulary holds words made of Markdown
and HTML (issue 44: such a word once drew an image, a badge and a link on the Why this prediction? page)."""

from __future__ import annotations

from pathlib import Path

# Each is one word to this tokenizer. 192.0.2.1 is TEST-NET-1: never a real host.
PAYLOAD_WORDS = ["?a=look", "![x](//192.0.2.1/w.png)", ":red-background[RED]", "[link](http://192.0.2.1/l)",
                 "<img/src=//192.0.2.1/i.png>", "**bold**", "`code`", "$x^2$"]
PLAIN_WORDS = ["the", "cat", "sat", "on", "mat", "."]
PAYLOAD_SENTENCE = " ".join(["the", "cat", *PAYLOAD_WORDS[:4], "sat", "on", *PAYLOAD_WORDS[4:], "mat", "."])


def make_payload_mlm(folder: Path, *, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaForMaskedLM

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    vocab = {token: i for i, token in enumerate(specials + [f"▁{w}" for w in PLAIN_WORDS + PAYLOAD_WORDS])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                        cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
                                        model_max_length=64)
    tokenizer.save_pretrained(folder)
    config = XLMRobertaConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=64, max_position_embeddings=70, pad_token_id=1, bos_token_id=0,
                              eos_token_id=2, type_vocab_size=1)
    torch.manual_seed(seed)
    XLMRobertaForMaskedLM(config).save_pretrained(folder, safe_serialization=True)
    return folder
