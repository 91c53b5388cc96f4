"""The plan command's parsing of a trailing ``-- vllm serve MODEL [FLAGS]``."""

from __future__ import annotations

from typing import Any

from mmcli.cli.help import PanelledCommand
from mmcli.errors import InputError


class _Twice(list[str]):
    """The tokens after ``--`` when ``--serve`` gave a line too."""


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
        twice = ctx.params.get("serve") is not None
        ctx.params["serve"] = _Twice(line) if twice else line
        return rest


def refuse_twice(serve: object) -> None:
    """A serve line given with ``--serve`` and again after ``--`` is refused."""
    if isinstance(serve, _Twice):
        raise InputError(
            "give the serve line once: --serve or after --",
            hint="kv-share plan [OPTIONS] -- vllm serve MODEL [FLAGS], or --serve 'vllm serve …'",
        )
