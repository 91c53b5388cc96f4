"""Exit codes and the exception hierarchy: every failure mmcli reports passes through here."""

from __future__ import annotations

from typing import Final

#: Ran, and nothing is wrong (with ``--strict``: no warnings either).
EXIT_OK: Final = 0
#: Ran, and found problems in the input being checked.
EXIT_FINDINGS: Final = 1
#: Could not run: bad arguments, an unreadable or malformed input file.
EXIT_BAD_INPUT: Final = 2
#: An internal error (a bug in mmcli).
EXIT_INTERNAL: Final = 3
#: Interrupted (Ctrl-C): 128 + SIGINT, as shells report it.
EXIT_INTERRUPTED: Final = 130
#: stdout's reader went away (``mmcli ... | head -1``): 128 + SIGPIPE, as shells report it.
EXIT_BROKEN_PIPE: Final = 141


class MmcliError(Exception):
    """Base of every error mmcli raises on purpose; carries a one-line message and a hint."""

    exit_code: int = EXIT_BAD_INPUT

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class InputError(MmcliError, ValueError):
    """Bad input: arguments, files, configs or tensors that mmcli cannot work with (exit 2)."""

    exit_code = EXIT_BAD_INPUT


class EncoderOutputError(MmcliError, ValueError):
    """Encoder outputs that fail the engine's sanity check (exit 1: the input was checked)."""

    exit_code = EXIT_FINDINGS


class KVSharingError(InputError):
    """A cross-layer KV-sharing map that cannot be applied; nothing was mutated."""

    def __init__(self, message: str, *, problems: list[str], hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.problems = problems
