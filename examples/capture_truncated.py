"""Capture a dump from a real model whose prompt lost its image tokens to truncation.

A tiny, randomly initialised LLaVA is built from configs (no download; a few seconds on a
CPU, most of them importing transformers). Its prompt is cut to ``MAX_LENGTH`` tokens, as a
tokenizer called with ``truncation=True`` cuts it, which drops the image placeholder tokens;
the image is still passed. transformers raises; ``mmcli.capture.transformers`` writes the
failing batch, and the model's error is caught::

    python examples/capture_truncated.py dumps/
    mmcli check-embeddings dumps/

Needs ``pip install 'mmcli[capture]'`` (transformers).
"""

from __future__ import annotations

import sys

import torch
from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

import mmcli

IMAGE = 63  # the image placeholder token id
MAX_LENGTH = 6  # the tokenizer's limit: the prompt below is 11 tokens


def tiny_llava() -> LlavaForConditionalGeneration:
    """CLIP vision tower (8 px images in 4 px patches: 4 rows per image) and a Llama text
    model of hidden size 32, one layer each, every weight drawn from N(0, 0.02)."""
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=8,
            patch_size=4,
        ),
        text_config=LlamaConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            vocab_size=64,
            max_position_embeddings=64,
        ),
        image_token_id=IMAGE,
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )
    model = LlavaForConditionalGeneration(config)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
    return model.eval()


def main(out_dir: str) -> None:
    torch.manual_seed(0)
    model = tiny_llava()
    # "<s> USER: … <image> what is this? ASSISTANT:" with the image expanded to its 4 rows.
    prompt = [1, 10, 11, 12, 13, 14, IMAGE, IMAGE, IMAGE, IMAGE, 15]
    inputs = {
        "input_ids": torch.tensor([prompt[:MAX_LENGTH]]),  # truncated before the image
        "pixel_values": torch.randn(1, 3, 8, 8),
    }
    try:
        with mmcli.capture.transformers(model, out_dir, when="failure") as capture:
            model.generate(**inputs, max_new_tokens=1, do_sample=False)
    except ValueError:  # the model's own error, unchanged: the dump records it
        pass
    for path in capture.written:
        print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "dumps/")
