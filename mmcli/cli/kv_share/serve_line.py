"""The plan command's parsing of a trailing ``-- vllm serve MODEL [FLAGS]``."""

from __future__ import annotations

from typing import Any

from mmcli.cli.help import PanelledCommand


class ServeLineCommand(PanelledCommand):
    """The plan command; what follows ``--`` is a ``vllm serve`` line: the ``serve`` parameter
    as its tokens."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if "--" not in args:
            return super().parse_args(ctx, args)
        line = args[args.index("--") + 1 :]
        asked, self.no_args_is_help = self.no_args_is_help, False
        try:
            rest = super().parse_args(ctx, args[: args.index("--")])
        finally:
            self.no_args_is_help = asked
        ctx.params["serve"] = None if ctx.params.get("serve") is not None else line
        return rest
