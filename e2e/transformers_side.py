"""The reference side of the e2e comparison: the tiny LLaVA through transformers, captured.

``python e2e/transformers_side.py MODEL_DIR DUMP_DIR`` loads the model the vLLM scenarios
serve (transformers 5 reads the vision tower under vLLM's ``vision_tower.vision_model.*``
names too; a missing or unexpected weight is an error), runs each e2e prompt through
``generate`` inside ``mmcli.capture.transformers(model, DUMP_DIR, when="always")``, one prompt
per call (one dump per prompt, holding that prompt's token ids, which is what
``mmcli compare`` pairs the two sides by), and prints the files written.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(model_dir: str, dumps: str) -> int:
    import torch
    from transformers import AutoProcessor, LlavaForConditionalGeneration

    import mmcli

    sys.path.insert(0, str(HERE))
    from prompts import PROMPTS, image

    model, info = LlavaForConditionalGeneration.from_pretrained(
        model_dir, dtype=torch.float32, output_loading_info=True
    )
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys")}
    if bad:
        print(f"transformers could not load every weight: {bad}", file=sys.stderr)
        return 1
    model.eval()
    processor = AutoProcessor.from_pretrained(model_dir)
    with mmcli.capture.transformers(model, dumps, when="always") as capture:
        for index, text in enumerate(PROMPTS):
            inputs = processor(text=text, images=image(index), return_tensors="pt")
            with torch.no_grad():
                model.generate(**inputs, max_new_tokens=4, do_sample=False)
    print("transformers dumps:", [p.name for p in capture.written])
    return 0 if len(capture.written) == len(PROMPTS) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
