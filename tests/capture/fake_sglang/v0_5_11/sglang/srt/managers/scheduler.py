"""Stand-in for the scheduler process's entry point (0.5.11+): it loads the general plugins
first thing, in the scheduler process, where the model runs."""

from sglang.srt.plugins import load_plugins


def run_scheduler_process(step):
    load_plugins()
    return step()
