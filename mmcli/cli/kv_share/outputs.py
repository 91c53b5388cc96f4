"""Where ``kv-share plan`` writes: its files checked before any planning, its notes said after.

Exit 2 is exactly one ``error:`` line and one ``hint:`` line, so nothing else may reach stderr
before a run has worked: a note (``Auto-fit max_model_len: …``, ``wrote N map entries …``) is
held in :class:`Notes` and said once the result is printed, never before an error.
"""

from __future__ import annotations

from pathlib import Path

from mmcli.cli._output import stderr


def check_outputs(emit_map: Path | None, plot: Path | None) -> None:
    """Refuse ``--emit-map`` and ``--plot`` targets that writing them would refuse (a device
    other than the null device, an input of this run or a link to one, a directory, a missing
    directory, a plot that is not .png or .svg): called once every input is read."""
    from mmcli.atomic import check_target

    if emit_map is not None and str(emit_map) != "-":  # write_map says why - is refused
        check_target(emit_map)
    if plot is not None:
        from mmcli.cli.kv_share.chart import check_plot_path

        check_plot_path(plot)


class Notes(list[str]):
    """Lines for stderr, held until the command has succeeded (see the module docstring)."""

    def say(self) -> None:
        for note in self:
            stderr().print(note, markup=False, highlight=False)
