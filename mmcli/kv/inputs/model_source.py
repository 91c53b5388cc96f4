"""What ``kv-share plan MODEL`` names: a config file, a local model folder, or a Hub repo id.

An existing local path always wins. A folder (a ``save_pretrained`` folder or a Hub cache
snapshot) gives its ``config.json``, and its weights (index or safetensors headers) when
``--gpu`` asks for them. ``org/name`` that is not a local path is a Hub repo id, read through
:mod:`mmcli.kv.inputs.hub`. ``--revision`` belongs to a repo id only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmcli.errors import InputError
from mmcli.text import printable


@dataclass(frozen=True)
class ModelSource:
    """Where the config came from, so that a plan says it and can be reproduced."""

    #: The config file to read.
    config: Path
    #: ``file``, ``folder`` or ``hub``.
    kind: str
    #: The model folder (``folder``) or the cache snapshot folder (``hub``).
    folder: Path | None = None
    repo: str | None = None
    revision: str | None = None
    commit: str | None = None

    @property
    def label(self) -> str:
        """``Qwen/Qwen3-8B@0123abcd4567 (config.json)``, ``models/qwen3 (config.json)``, a path."""
        if self.kind == "hub":
            return f"{self.repo}@{(self.commit or '')[:12]} (config.json, Hugging Face Hub)"
        if self.kind == "folder":
            return f"{printable(str(self.folder))} (config.json, local folder)"
        return printable(str(self.config))

    def side_file(self, name: str) -> Path | None:
        """A file of the model beside its config (``preprocessor_config.json``): fetched with a
        Hub repo's config, read from a model folder; None for a config file, or where the
        model has none."""
        if self.kind == "hub" and self.repo is not None:
            from mmcli.kv.inputs.hub import download_optional

            return download_optional(self.repo, name, self.commit or self.revision)
        path = None if self.folder is None else self.folder / name
        return path if path is not None and path.is_file() else None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": self.kind, "config": str(self.config)}
        if self.folder is not None:
            doc["folder"] = str(self.folder)
        if self.kind == "hub":
            doc |= {"repo": self.repo, "revision": self.revision, "commit": self.commit}
        return doc


def resolve_model(text: str | Path, revision: str | None = None) -> ModelSource:
    """The config file ``text`` names (a path, a model folder, or a Hub repo id)."""
    from mmcli.kv.inputs.hub import looks_like_repo_id

    name = str(text)
    path = Path(name)
    if path.exists():
        if revision is not None:
            raise InputError(
                f"--revision is for a Hub repo id, but {printable(name)} is a local path",
                hint="drop --revision, or name the repo (org/name) when no such local path exists",
            )
        if path.is_dir():
            config = path / "config.json"
            if not config.is_file():
                raise InputError(
                    f"the folder {printable(name)} holds no config.json",
                    hint="give a model folder (save_pretrained or a Hub snapshot) or a config file",
                )
            return ModelSource(config, "folder", folder=path)
        return ModelSource(path, "file")
    if looks_like_repo_id(name):
        from mmcli.kv.inputs.hub import download_config

        got = download_config(name, revision)
        return ModelSource(
            got.path, "hub", folder=got.path.parent, repo=name, revision=revision, commit=got.commit
        )
    if revision is not None:
        raise InputError(
            f"--revision is for a Hub repo id, and {printable(name)} is not one",
            hint="a repo id is org/name, e.g. Qwen/Qwen3-8B",
        )
    return ModelSource(path, "file")  # the reader says it is missing, as for any file
