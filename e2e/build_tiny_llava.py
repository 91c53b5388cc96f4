"""Build a tiny, randomly initialised LLaVA (weights, tokenizer, processor) offline.

CLIP vision tower: hidden 64, 2 layers, 32 px images in 16 px patches -> 4 image tokens.
Llama text model: hidden 64, 2 layers, 2 heads of size 32 (vLLM's CPU attention takes head
sizes 32, 64, 80, ...), vocabulary 1000. A WordLevel tokenizer with ``<image>``. About 1.4 MB,
a few seconds, no downloads. Usage: ``python e2e/build_tiny_llava.py OUT_DIR``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    CLIPImageProcessor,
    CLIPVisionConfig,
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
    PreTrainedTokenizerFast,
)

VOCAB = 1000
SPECIAL = ["<unk>", "<s>", "</s>", "<pad>", "<image>"]
WORDS = "user assistant describe the image what is this a picture of cat dog color".split()


def build(out: Path) -> None:
    torch.manual_seed(0)
    vocab = {tok: i for i, tok in enumerate(SPECIAL + WORDS)}
    for i in range(len(vocab), VOCAB):
        vocab[f"w{i}"] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        extra_special_tokens={"image_token": "<image>"},
    )
    image_token_id = vocab["<image>"]
    vision = CLIPVisionConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=32,
        patch_size=16,
        projection_dim=64,
    )
    text = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=image_token_id,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    model = LlavaForConditionalGeneration(config).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(
            size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
        ),
        tokenizer=tokenizer,
        patch_size=16,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=None,
    )
    processor.save_pretrained(out)
    # transformers 5 saves the vision tower as vision_tower.embeddings...; vLLM loads
    # vision_tower.vision_model.embeddings... (the transformers 4 layout).
    weights = out / "model.safetensors"
    state = load_file(str(weights))
    renamed = {}
    for key, value in state.items():
        for prefix in ("model.vision_tower.", "vision_tower."):
            if key.startswith(prefix) and not key.startswith(prefix + "vision_model."):
                key = prefix + "vision_model." + key[len(prefix) :]
                break
        renamed[key] = value
    save_file(renamed, str(weights), metadata={"format": "pt"})
    cfg = json.loads((out / "config.json").read_text())
    print(
        f"built {out}: {cfg['architectures']}, image token {image_token_id}, "
        f"{sum(v.numel() for v in renamed.values())} parameters"
    )


if __name__ == "__main__":
    build(Path(sys.argv[1] if len(sys.argv) > 1 else "e2e-out/tiny-llava"))
