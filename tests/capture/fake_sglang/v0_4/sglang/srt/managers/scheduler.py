"""Stand-in for the scheduler process's entry point: one prefill of a tiny model with two
images (``--fault NAME`` breaks its encoder). 0.4.x loads no plugins here."""

import sys

from fake_sglang_shared.model import FakeVLM, batch, prompt


def run_scheduler_process(argv: list[str]) -> None:
    fault = argv[argv.index("--fault") + 1] if "--fault" in argv else None
    model = FakeVLM(fault)
    ids, fb = batch([prompt([3, 4], pad=40)])
    try:
        model(ids, fb)
    except Exception as error:
        print(f"scheduler: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(3)
