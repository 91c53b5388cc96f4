"""Stand-in for ``python -m sglang.launch_server``: the scheduler runs in a process started
with ``spawn`` (as ``sglang.srt.entrypoints.engine`` sets it), where the model runs."""

import multiprocessing as mp
import sys

if __name__ == "__main__":
    from sglang.srt.managers.scheduler import run_scheduler_process

    mp.set_start_method("spawn", force=True)
    proc = mp.Process(target=run_scheduler_process, args=(sys.argv[1:],))
    proc.start()
    proc.join()
    sys.exit(proc.exitcode)
