"""The weights figure of a ``--gpu`` estimate, and where it came from.

In order: ``--weights`` (a size with a byte unit, a checkpoint file or folder, or a Hub repo
id); else the model's own folder or Hub repo (index ``total_size`` or safetensors headers);
else an ESTIMATE from the config's geometry (:mod:`mmcli.kv.hf.weights`), marked as one; else
a refusal. Never zero by default.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmcli.atomic import protect
from mmcli.errors import InputError
from mmcli.kv.inputs.model_source import ModelSource
from mmcli.text import printable, quoted

#: A size with a byte unit: ``140GB``, ``130GiB``, ``1.5TiB``, ``141107412992B`` (not ``70``).
_SIZED = re.compile(r"^\s*\d+(\.\d+)?\s*([KMGT]i?)?B\s*$", re.IGNORECASE)
#: Less than this is no model's weights: ``70B`` meant parameters, not 70 bytes.
_SMALLEST = 2**20


@dataclass(frozen=True)
class WeightsFigure:
    """The checkpoint's bytes, what they were read from, and whether they are an estimate."""

    total_bytes: int
    source: str
    estimated: bool = False
    detail: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "bytes": self.total_bytes,
            "source": self.source,
            "estimate": self.estimated,
        }
        if self.detail is not None:
            doc["detail"] = self.detail
        return doc


def weights_figure(
    weights: str | None, model: ModelSource | None, revision: str | None = None
) -> WeightsFigure:
    """What the ``--gpu`` estimate subtracts for the weights (see the module docstring)."""
    if weights is not None:
        return _given(weights, model, revision)
    if model is not None and model.kind == "hub" and model.repo is not None:
        from mmcli.kv.inputs.hub import hub_weights

        got = hub_weights(model.repo, model.revision)
        return WeightsFigure(got.total_bytes, got.label)
    if model is not None and model.kind == "folder" and model.folder is not None:
        folder = model.folder
        if (folder / "model.safetensors.index.json").is_file() or any(folder.glob("*.safetensors")):
            return WeightsFigure(weights_total(str(folder)), _label(folder))
    if model is None:
        raise InputError("--gpu needs --weights here", hint="e.g. --weights 16GiB")
    return _estimated(model.config)


def is_size(spec: str) -> bool:
    """Whether ``--weights`` is a size with a byte unit (not a checkpoint or a Hub repo)."""
    return _SIZED.match(spec) is not None


def _given(spec: str, model: ModelSource | None, revision: str | None) -> WeightsFigure:
    from mmcli.kv.inputs.hub import looks_like_repo_id

    if spec.strip() and (Path(spec).exists() or spec.endswith((".json", ".safetensors"))):
        return WeightsFigure(weights_total(spec), _label(Path(spec)))
    if looks_like_repo_id(spec):
        from mmcli.kv.inputs.hub import hub_weights

        same = model is not None and model.kind == "hub" and model.repo == spec
        got = hub_weights(spec, revision if same else None)
        return WeightsFigure(got.total_bytes, got.label)
    if _SIZED.match(spec) is None:
        raise InputError(
            f"--weights: {quoted(spec)} is not a size with a byte unit, a checkpoint path or a "
            "Hub repo id",
            hint="write bytes with a unit, e.g. 140GB or 130GiB (a 70B-parameter bf16 model is "
            "about 140GB); or give the checkpoint's index, folder or repo id",
        )
    total = weights_total(spec)
    if total < _SMALLEST:
        raise InputError(
            f"--weights {quoted(spec)} is {total:,} bytes: too small for a model's weights (a "
            "count of parameters?)",
            hint="write the bytes, e.g. 140GB for 70B parameters in bf16 (2 bytes each), or give "
            "the checkpoint's index, folder or repo id",
        )
    return WeightsFigure(total, f"--weights {spec.strip()}")


def _label(path: Path) -> str:
    """What a checkpoint path's figure was read from, for the report."""
    if path.is_dir():
        index = path / "model.safetensors.index.json"
        if index.is_file():
            return f"{printable(str(index))} (metadata.total_size)"
        shards = len(list(path.glob("*.safetensors")))
        return f"{printable(str(path))}: {shards} .safetensors header{'s' * (shards != 1)}"
    if path.suffix == ".json":
        return f"{printable(str(path))} (metadata.total_size)"
    return f"{printable(str(path))} (header)"


def _estimated(config: Path) -> WeightsFigure:
    from mmcli.kv.hf.weights import estimate_weights

    try:
        doc = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        doc = None
    if not isinstance(doc, dict) or "model_type" not in doc:
        raise InputError(
            "--gpu: the weights are not known: give --weights (this config is not a Hugging "
            "Face config.json to estimate them from)",
            hint="e.g. --weights 16GiB, --weights model.safetensors.index.json, or a repo id",
        )
    if isinstance(doc.get("text_config"), dict) or "vision_config" in doc:
        raise InputError(
            "--gpu: cannot estimate the weights of a multimodal config (its encoder is not "
            "counted)",
            hint="give the weights with --weights (a size such as 16GiB, the checkpoint's "
            "folder or index, or its Hub repo id)",
        )
    est = estimate_weights(doc)
    return WeightsFigure(est.total_bytes, est.describe(), estimated=True, detail=est.to_json())


def weights_total(spec: str) -> int:
    """Bytes of ``--weights``: a size (``16GiB``), or a checkpoint path.

    A path may be a ``model.safetensors.index.json`` (its ``metadata.total_size``), one
    ``.safetensors`` file (the bytes of the tensors its header declares, read by the dump
    reader's strict, bounded header parser; no tensor data is read), or a folder holding
    either (the index if present, else every ``*.safetensors`` header). An index counts every
    tensor's bytes, so both ways give the same figure for one checkpoint.
    """
    from mmcli.kv.inputs.checkpoint import index_total
    from mmcli.kv.options import parse_size

    path = Path(spec)
    if path.is_dir():
        index = path / "model.safetensors.index.json"
        if index.is_file():
            return index_total(index)
        shards = sorted(path.glob("*.safetensors"))
        if not shards:
            raise InputError(
                f"--weights: {printable(str(path))} holds no model.safetensors.index.json and "
                "no .safetensors file",
                hint="give the checkpoint folder, its index file, or a size such as 16GiB",
            )
        return sum(safetensors_total(p) for p in shards)
    if path.suffix == ".json" and path.is_file():
        return index_total(path)
    if path.suffix == ".safetensors":
        return safetensors_total(path)
    if path.exists():
        raise InputError(
            f"--weights: {printable(str(path))} is neither a .safetensors file nor a "
            "safetensors index (.json)",
            hint="give model.safetensors.index.json, a .safetensors file, or a size like 16GiB",
        )
    return parse_size(spec)


def safetensors_total(path: Path) -> int:
    """Bytes of the tensors a ``.safetensors`` file's header declares (no data read); a file
    that is not a valid safetensors file is one InputError naming ``--weights``."""
    return sum(tensor_sizes(path).values())


def tensor_sizes(path: Path) -> dict[str, int]:
    """Each tensor's bytes by name, as a ``.safetensors`` file's header declares them."""
    from mmcli.dump.safetensors import read_header

    try:
        header = read_header(path)
    except InputError as exc:
        raise InputError(f"--weights: {exc.message}", hint=exc.hint) from None
    protect(path)  # an input: --emit-map or --plot may not replace it
    return {name: t.nbytes for name, t in header.tensors.items()}
