"""``--map`` files: read a ``{layer: target}`` map, apply it to a config, write one atomically."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from mmcli.atomic import atomic_write
from mmcli.errors import InputError
from mmcli.findings import Finding
from mmcli.kv.inputs.readers import parse_json, read_text
from mmcli.kv.inputs.values import shown, type_name
from mmcli.kv.model import ModelConfig

#: Findings of one kind (unknown or repeated keys) listed one by one; the rest are counted in
#: one more finding, so a map with 100,000 bad keys gives a short report, quickly.
_MAX_EACH = 20


class _Pairs(list[tuple[str, Any]]):
    """A JSON object's members in file order, repeats kept (``object_pairs_hook``)."""


def load_map(path: Path) -> list[tuple[str, str | None]]:
    """Read a ``{layer: target}`` JSON map, keeping repeated keys (they are findings)."""
    text = read_text(path)
    doc = parse_json(path, text, object_pairs_hook=_Pairs)
    if not isinstance(doc, _Pairs):
        kind = "array" if isinstance(doc, list) else type_name(doc)
        raise InputError(
            f"{path}: the map must be a JSON object {{layer: target}}, got {kind}",
            hint='e.g. {"model.layers.2.self_attn.attn": "model.layers.0.self_attn.attn"}',
        )
    out: list[tuple[str, str | None]] = []
    for key, value in doc:
        if value is not None and not isinstance(value, str):
            kind = "object" if isinstance(value, _Pairs) else shown(value)
            raise InputError(
                f"{path}: the target of {key} must be a layer name or null, got {kind}",
                hint="targets are layer names (strings); null means the layer owns its cache",
            )
        out.append((key, value))
    return out


def apply_map(config: ModelConfig, pairs: list[tuple[str, str | None]]) -> list[Finding]:
    """Replace the config's sharing map by ``pairs`` (in place); findings for bad keys.

    Keys and targets are layer names, or layer indices written as decimal strings.
    """
    index_of: dict[str, int] = {}
    for i, layer in enumerate(config.layers):
        index_of.setdefault(layer.name, i)
    n = len(config.layers)

    width = len(str(n))

    def resolve(name: str) -> int | None:
        if name in index_of:
            return index_of[name]
        # Only ASCII digits are an index ('١' is not layer 1); a long number is no layer.
        if name.isascii() and name.isdigit() and len(name) <= width and int(name) < n:
            return int(name)
        return None

    findings: list[Finding] = []
    targets: dict[int, str | None] = {}
    seen: set[int] = set()
    unknown = duplicates = 0
    for key, value in pairs:
        found = resolve(key)
        if found is None:
            unknown += 1
            if unknown > _MAX_EACH:
                continue
            findings.append(
                Finding(
                    "unknown-layer",
                    "error",
                    f"the map names {key}, which is not a layer of this model",
                    hint="map keys are layer names (or indices) of the model",
                    layer=key,
                )
            )
            continue
        i = found
        if i in seen:
            duplicates += 1
        if i in seen and duplicates <= _MAX_EACH:
            findings.append(
                Finding(
                    "duplicate-layer",
                    "error",
                    f"the map gives layer {i} ({config.layers[i].name}) more than one target",
                    hint="each layer appears at most once in the map",
                    layer=config.layers[i].name,
                )
            )
        seen.add(i)
        if value is not None and value not in index_of:
            j = resolve(value)
            value = config.layers[j].name if j is not None else value
        targets[i] = value
    if unknown > _MAX_EACH:
        findings.append(
            Finding(
                "unknown-layer",
                "error",
                f"the map names {unknown - _MAX_EACH:,} more keys that are not layers of this "
                f"model (the first {_MAX_EACH} are listed)",
                hint="map keys are layer names (or indices) of the model",
            )
        )
    if duplicates > _MAX_EACH:
        findings.append(
            Finding(
                "duplicate-layer",
                "error",
                f"the map repeats {duplicates - _MAX_EACH:,} more layers (the first {_MAX_EACH} "
                "are listed)",
                hint="each layer appears at most once in the map",
            )
        )
    config.layers = [
        replace(layer, kv_sharing_target=targets.get(i)) for i, layer in enumerate(config.layers)
    ]
    config.map_findings = []
    return findings


def write_map(path: Path, mapping: dict[str, str]) -> int:
    """Write ``{layer: target}`` as JSON atomically (temp file, then rename); entries written.

    ``-`` is refused, not taken as a file name: stdout carries the plan. So is any existing
    file that is not a regular file and any input of this run (the config or the ``--map``
    file): see :func:`mmcli.atomic.atomic_write`.
    """
    if str(path) == "-":
        raise InputError(
            "--emit-map -: the map cannot go to stdout (stdout carries the plan)",
            hint="give --emit-map the path of a file to write, e.g. --emit-map map.json",
        )
    with atomic_write(path) as fh:
        fh.write((json.dumps(mapping, indent=2) + "\n").encode("utf-8"))
    return len(mapping)
