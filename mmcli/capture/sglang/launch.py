"""Start SGLang's server with mmcli's capture hook in every process, for releases without
plugins (before 0.5.11)::

    MMCLI_DUMP_DIR=dumps python -m mmcli.capture.sglang.launch --model-path … [options]

takes the place of ``python -m sglang.launch_server`` with the same options. SGLang starts its
scheduler processes (where the model runs) with ``spawn``, and a spawned process first
re-imports its parent's main module under the name ``__mp_main__``: the
:func:`~mmcli.capture.sglang.register` call at the top of this module so runs in each of them.
In the parent, :func:`main` then runs ``sglang.launch_server`` as ``__main__`` with this
command line. From 0.5.11 on, SGLang loads the plugin itself (the ``sglang.srt.plugins`` entry
point) and this launcher changes nothing.
"""

from __future__ import annotations

import runpy

from mmcli.capture.sglang.plugin import register

register()  # inert unless MMCLI_DUMP_DIR is set


def main() -> None:
    """Run ``python -m sglang.launch_server`` in this process, with this command line."""
    runpy.run_module("sglang.launch_server", run_name="__main__", alter_sys=False)


if __name__ == "__main__":
    main()
