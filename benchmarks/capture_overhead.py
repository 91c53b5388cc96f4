"""What capture costs per encoder batch: mode ``check`` (an in-memory diagnosis of every
batch) against no capture, and that a capture that is off costs nothing.

``check`` mode's cost is :meth:`Capturer.record` on a healthy batch (nothing is written):
the diagnosis reads the outputs once (finiteness, row norms) and counts the masks. It is
timed on realistic batch sizes, and on a tiny LLaVA end to end (forward with the capture
off, i.e. outside the ``with`` block where nothing is patched, against inside it).

    .venv/bin/python benchmarks/capture_overhead.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

import torch

from mmcli.capture._common import CaptureContext, Capturer


def best_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def batch_overhead(repeat: int) -> None:
    print("mode check: Capturer.record per healthy encoder batch (CPU, nothing written)")
    cases = [
        ("1 image x 576 rows x 4096 bf16 (LLaVA-1.5-7B)", 1, 576, 4096, torch.bfloat16),
        ("4 images x 576 rows x 4096 bf16", 4, 576, 4096, torch.bfloat16),
        ("1 image x 1024 rows x 3584 bf16 (Qwen2.5-VL-7B, 896 px)", 1, 1024, 3584, torch.bfloat16),
        ("8 images x 256 rows x 2560 bf16 (Gemma 3 4B)", 8, 256, 2560, torch.bfloat16),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        cap = Capturer(tmp, mode="check")
        for label, items, rows, hidden, dtype in cases:
            outs = [torch.randn(rows, hidden).to(dtype) for _ in range(items)]
            masks = [torch.ones(rows, dtype=torch.bool) for _ in range(items)]
            ids = torch.tensor(([1] + [7] * rows) * items + [2])
            ctx = CaptureContext(
                input_ids=ids, placeholder_token_ids=[7], hidden_size=hidden, dtype=dtype
            )
            ms = best_ms(lambda: cap.record(outs, is_embed=masks, context=ctx), repeat)  # noqa: B023
            mb = items * rows * hidden * outs[0].element_size() / 2**20
            print(f"  {label:<58} {mb:7.1f} MiB  {ms:8.3f} ms")
        assert not cap.written


def tiny_model(repeat: int) -> None:
    try:
        from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig
        from transformers import LlavaForConditionalGeneration as Llava
    except ImportError:
        print("tiny LLaVA end to end: skipped (pip install 'mmcli[capture]')")
        return
    import mmcli.capture as capture

    torch.manual_seed(0)
    vision = CLIPVisionConfig(
        hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        image_size=8, patch_size=4,
    )  # fmt: skip
    text = LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, vocab_size=64,
    )  # fmt: skip
    model = Llava(LlavaConfig(vision_config=vision, text_config=text, image_token_id=63)).eval()
    ids = torch.tensor([[1, 2, *[63] * 4, 3]])
    pixels = torch.randn(1, 3, 8, 8)

    def forward() -> object:
        with torch.no_grad():
            return model(input_ids=ids, pixel_values=pixels)

    off = best_ms(forward, repeat)
    with tempfile.TemporaryDirectory() as tmp:
        with capture.transformers(model, tmp, when="failure"):
            failure = best_ms(forward, repeat)
        with capture.transformers(model, tmp, when="check") as cap:
            check = best_ms(forward, repeat)
        assert not cap.written
    after = best_ms(forward, repeat)
    print("tiny LLaVA forward, end to end (wrapper + diagnosis; the model itself is tiny)")
    print(f"  capture off (before)   {off:8.3f} ms")
    print(f"  when='failure'         {failure:8.3f} ms  (+{failure - off:.3f} ms)")
    print(f"  when='check'           {check:8.3f} ms  (+{check - off:.3f} ms)")
    print(f"  capture off (after)    {after:8.3f} ms  (the wrappers are gone)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    batch_overhead(args.repeat)
    tiny_model(args.repeat)


if __name__ == "__main__":
    main()
