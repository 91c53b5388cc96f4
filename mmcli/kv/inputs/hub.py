"""A model on the Hugging Face Hub: its ``config.json`` and its weights' size, never its weights.

Everything goes through ``huggingface_hub`` (imported here, lazily): the endpoint and
``HF_ENDPOINT`` mirrors, ``HF_TOKEN`` / ``hf auth login``, the cache (a second run needs no
network), ``HF_HUB_OFFLINE``, retries and redirects are the library's. The weights' size is the
index's ``metadata.total_size`` (one small file, cached), or for a one-file checkpoint the
bytes its safetensors header declares, read by range requests (about 100 KB). Every library
error becomes one :class:`InputError` with a hint.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

from mmcli.errors import InputError
from mmcli.text import printable

#: ``org/name`` as the Hub spells a repo id (one slash, letters, digits, ``-``, ``_``, ``.``).
_REPO_ID: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
#: Names that are files, not repos, even when they look like ``org/name``.
_FILE_SUFFIXES: Final = (".json", ".toml", ".safetensors", ".log", ".txt")

INDEX: Final = "model.safetensors.index.json"
SINGLE: Final = "model.safetensors"

T = TypeVar("T")


def looks_like_repo_id(text: str) -> bool:
    """``Qwen/Qwen3-8B`` yes; ``config.json``, ``a/b.json``, ``./x/y``, ``a/b/c`` no."""
    return bool(_REPO_ID.match(text)) and not text.lower().endswith(_FILE_SUFFIXES)


@dataclass(frozen=True)
class HubFile:
    """One file of a repo, where the cache holds it, and the commit it came from."""

    repo: str
    filename: str
    path: Path
    #: The commit the revision resolved to (from the cache's snapshot folder name).
    commit: str

    @property
    def label(self) -> str:
        """``Qwen/Qwen3-8B@0123abcd:config.json``."""
        return f"{self.repo}@{self.commit[:12]}:{self.filename}"


@dataclass(frozen=True)
class HubWeights:
    """The bytes of a repo's weights and the files they were read from."""

    total_bytes: int
    repo: str
    commit: str
    #: What was read: ``model.safetensors.index.json (metadata.total_size)`` or the header.
    how: str

    @property
    def label(self) -> str:
        return f"{self.repo}@{self.commit[:12]}: {self.how}"


def download_config(repo: str, revision: str | None) -> HubFile:
    """``config.json`` of ``repo`` at ``revision`` (default branch), through the cache."""
    return _download(repo, "config.json", revision)


def download_optional(repo: str, filename: str, revision: str | None) -> Path | None:
    """``filename`` of ``repo`` through the cache, or None where the repo has no such file."""
    try:
        return _download(repo, filename, revision).path
    except _Missing:
        return None


def hub_weights(repo: str, revision: str | None) -> HubWeights:
    """The weights' bytes of ``repo``: its index's ``total_size``, else the single file's header."""
    from mmcli.kv.inputs.checkpoint import index_total

    try:
        index = _download(repo, INDEX, revision)
    except _Missing:
        pass
    else:
        how = f"{INDEX} (metadata.total_size)"
        return HubWeights(index_total(index.path), repo, index.commit, how)
    files = _repo_files(repo, revision)
    if SINGLE not in files:
        shards = [f for f in files if f.endswith(".safetensors")]
        kind = f"{len(shards)} .safetensors files but no {INDEX}" if shards else "no safetensors"
        raise InputError(
            f"--gpu: the Hub repo {repo} has {kind} to read the weights' size from "
            f"(its files: {_listing(files)})",
            hint="give the weights' size with --weights, e.g. --weights 16GiB",
        )
    total, commit = _single_file_bytes(repo, revision)
    return HubWeights(total, repo, commit, f"{SINGLE} header (range requests)")


class _Missing(Exception):
    """A file the repo does not have (the caller decides whether that is an error)."""


def _download(repo: str, filename: str, revision: str | None) -> HubFile:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    def fetch() -> str:
        return str(hf_hub_download(repo, filename, revision=revision))

    try:
        path = Path(_call(repo, revision, fetch, filename))
    except EntryNotFoundError:  # on the Hub (offline or unreachable are InputErrors of _call)
        if filename != "config.json":
            raise _Missing(filename) from None
        files = _repo_files(repo, revision)
        raise InputError(
            f"the Hub repo {repo} has no config.json (its files: {_listing(files)})",
            hint="give the config file itself, or the repo of the base model",
        ) from None
    return HubFile(repo, filename, path, path.parent.name)


class _Malformed(Exception):
    """An answer of the Hub's shape-less kind: the library could not read it as the Hub's."""


def _repo_files(repo: str, revision: str | None) -> list[str]:
    from huggingface_hub import HfApi

    def listing() -> list[str]:
        try:
            files = HfApi().list_repo_files(repo, revision=revision)
        except (KeyError, TypeError, AttributeError) as exc:  # entries not as the Hub lays them
            raise _Malformed(f"{type(exc).__name__}: {exc}") from None
        if not all(isinstance(f, str) for f in files):
            raise _Malformed("file names that are not text")
        return files

    return _call(repo, revision, listing)


def _single_file_bytes(repo: str, revision: str | None) -> tuple[int, str]:
    from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url

    def read() -> tuple[int, str]:
        url = hf_hub_url(repo, SINGLE, revision=revision)
        commit = get_hf_file_metadata(url).commit_hash or (revision or "")
        meta = HfApi().parse_safetensors_file_metadata(repo, SINGLE, revision=revision)
        total = sum(t.data_offsets[1] - t.data_offsets[0] for t in meta.tensors.values())
        return total, commit

    return _call(repo, revision, read, SINGLE)


def _listing(files: list[str], most: int = 8) -> str:
    if not files:
        return "none"
    shown = ", ".join(printable(f) for f in sorted(files)[:most])
    return shown + (f", … ({len(files)} in all)" if len(files) > most else "")


def call_hub(repo: str, revision: str | None, do: Callable[[], T]) -> T:
    """``do()`` (a ``huggingface_hub`` call) quiet, its errors one InputError each."""
    return _call(repo, revision, do)


def _call(repo: str, revision: str | None, do: Callable[[], T], filename: str = "") -> T:
    """``do()`` with the library quiet, its errors turned into one InputError each."""
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
        SafetensorsParsingError,
    )

    at = f" at revision {printable(revision)}" if revision else ""
    try:
        with _quiet():
            return do()
    except GatedRepoError:
        raise InputError(
            f"the Hub repo {repo} is gated: its files need an accepted license and a token",
            hint=f"accept the license on {constants.ENDPOINT}/{repo}, then run `hf auth login` "
            "or set HF_TOKEN",
        ) from None
    except RepositoryNotFoundError:
        raise InputError(
            f"no Hub repo {repo} (or it is private and no token was given)",
            hint="check the repo id, or for a private repo run `hf auth login` or set HF_TOKEN",
        ) from None
    except RevisionNotFoundError:
        raise InputError(
            f"the Hub repo {repo} has no revision {printable(revision or '')}",
            hint="give a branch, tag or commit of the repo with --revision",
        ) from None
    except (OfflineModeIsEnabled, LocalEntryNotFoundError) as exc:
        offline = constants.HF_HUB_OFFLINE or isinstance(exc, OfflineModeIsEnabled)
        what = f"{filename} of {repo}{at}" if filename else f"the file list of {repo}{at}"
        if offline:
            raise InputError(
                f"HF_HUB_OFFLINE is set and the cache holds no {what}",
                hint="run once with the network (HF_HUB_OFFLINE unset), or give a local path",
            ) from None
        raise _unreachable(what) from None
    except EntryNotFoundError:
        raise
    except (SafetensorsParsingError, json.JSONDecodeError, _Malformed) as exc:
        what = f"{filename} of {repo}{at}" if filename else f"the file list of {repo}{at}"
        raise InputError(
            f"the Hub's answer for {what} is malformed: {printable(str(exc), 160)}",
            hint=f"check {constants.ENDPOINT} (HF_ENDPOINT): it answered, but not as the Hub does",
        ) from None
    except HFValidationError as exc:
        raise InputError(
            f"{printable(repo)} is not a valid Hub repo id or revision: {exc}",
            hint="a repo id is org/name, e.g. Qwen/Qwen3-8B",
        ) from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise InputError(
            f"the Hub answered HTTP {status} for {repo}{at}",
            hint=f"check {constants.ENDPOINT} (HF_ENDPOINT) and the repo id",
        ) from None
    except OSError as exc:  # connection refused, DNS, timeouts: the library's own retries ran
        raise _unreachable(f"{filename or 'the files'} of {repo}{at}", exc) from None


def _unreachable(what: str, exc: BaseException | None = None) -> InputError:
    from huggingface_hub import constants

    why = f" ({type(exc).__name__})" if exc is not None else ""
    return InputError(
        f"cannot reach the Hub at {constants.ENDPOINT} for {what}, and the cache holds none{why}",
        hint="check the network or HF_ENDPOINT; HF_HUB_OFFLINE=1 uses the cache only",
    )


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No progress bars and no library warnings on the terminal: mmcli reports the outcome."""
    from huggingface_hub.utils.tqdm import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    was_disabled = are_progress_bars_disabled()
    with warnings.catch_warnings():  # HF_HUB_DISABLE_PROGRESS_BARS=0 wins, and says so
        warnings.simplefilter("ignore")
        disable_progress_bars()
    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
        if not was_disabled:
            enable_progress_bars()
