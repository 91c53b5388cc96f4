"""The bad-input corpus: every command, every kind of broken input, one clean line and a hint.

Each case builds a tiny input in ``tmp_path``, runs one command through ``CliRunner`` and checks
the contract of SPEC §4/§5: the exit code (2 could not run; 1 the input was read and is wrong),
exactly one ``error:`` line and one ``hint:`` line on stderr naming the actual problem, nothing
on stdout in table mode and exactly one JSON document with the error in JSON mode, no
traceback, and a bounded run time (a hang guard, not a benchmark).
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from mmcli import dump_encoder_outputs
from mmcli.cli.main import app

runner = CliRunner()
#: Generous: a case that takes this long is hanging or allocating, not merely slow.
TIME_LIMIT_S = 10.0
H = 4

# -- raw safetensors bytes ------------------------------------------------------------------


def raw(header: Any, data: bytes = b"", *, length: int | None = None) -> bytes:
    """8-byte little-endian header length + header (JSON-encoded unless bytes) + data."""
    body = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(body) if length is None else length) + body + data


def entry(dtype: Any, shape: Any, begin: Any, end: int) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


META = {"format": "mm_dump", "format_version": "1"}
#: A valid 2 x 4 float32 item: 32 bytes of data.
ITEM = entry("F32", [2, H], 0, 32)
ITEM_DATA = struct.pack("<8f", *range(8))


def dump_header(**tensors: Any) -> dict[str, Any]:
    return {"__metadata__": dict(META), **tensors}


# Safetensors files that are not readable at all: both commands refuse them (exit 2).
HEADER_CASES: dict[str, tuple[bytes, str]] = {
    "empty-file": (b"", "file is 0 bytes, too short for the 8-byte header length"),
    "shorter-than-length-field": (b"\x10\x00\x00", "file is 3 bytes, too short"),
    "header-length-0": (raw(b"", b"{}", length=0), "header length is 0"),
    "header-length-past-end": (
        raw(b"{}", length=4096),
        "header declares 4096 bytes but the file has only 2 bytes after the length field",
    ),
    "header-length-2^40": (
        raw(b"{}", length=1 << 40),
        "header declares an absurd length of 1099511627776 bytes (>= 2^40)",
    ),
    "header-length-2^64-1": (
        raw(b"{}", length=(1 << 64) - 1),
        f"header declares an absurd length of {(1 << 64) - 1} bytes",
    ),
    "header-not-json": (raw(b"{'tensor': 1}"), "header is not valid JSON"),
    "header-deeply-nested-json": (raw(b"[" * 100_000), "header is not valid JSON"),
    "header-json-list": (raw(b"[1, 2]"), "header is a JSON list, not an object"),
    "header-json-string": (raw(b'"mm_embeddings"'), "header is a JSON str, not an object"),
    "header-invalid-utf8": (raw(b'{"\xff\xfe": 1}'), "header is not UTF-8 (invalid byte at"),
    "header-duplicate-key": (
        raw(b'{"a": ' + json.dumps(ITEM).encode() + b', "a": 1}', ITEM_DATA),
        "duplicate key 'a'",
    ),
    "data-offsets-past-end": (
        raw(dump_header(**{"mm_embeddings.0": entry("F32", [2, H], 0, 64)}), ITEM_DATA),
        "has data_offsets [0, 64] past the end of the data (32 bytes after the header)",
    ),
    "data-truncated": (
        raw(dump_header(**{"mm_embeddings.0": ITEM}), ITEM_DATA[:-4]),
        "past the end of the data (28 bytes after the header)",
    ),
    "data-offsets-overlapping": (
        raw(
            dump_header(
                **{"mm_embeddings.0": ITEM, "mm_embeddings.1": entry("F32", [1, H], 16, 32)}
            ),
            ITEM_DATA,
        ),
        "overlaps tensor 'mm_embeddings.0'",
    ),
    "data-offsets-reversed": (
        raw(dump_header(**{"mm_embeddings.0": entry("F32", [0], 32, 0)}), ITEM_DATA),
        "has data_offsets [32, 0]: end before begin",
    ),
    "data-offsets-not-integers": (
        raw(dump_header(**{"mm_embeddings.0": entry("F32", [2, H], "0", 32)}), ITEM_DATA),
        'has data_offsets ["0", 32]; expected [begin, end]',
    ),
    "data-gap-between-tensors": (
        raw(dump_header(**{"mm_embeddings.0": entry("F32", [1, H], 16, 32)}), ITEM_DATA),
        "16 unused bytes before tensor 'mm_embeddings.0'",
    ),
    "data-beyond-last-tensor": (
        raw(dump_header(**{"mm_embeddings.0": ITEM}), ITEM_DATA + b"\0" * 8),
        "tensors cover 32 bytes of data but the file holds 40 bytes after the header",
    ),
    "shape-times-dtype-inconsistent": (
        raw(dump_header(**{"mm_embeddings.0": entry("F32", [3, H], 0, 32)}), ITEM_DATA),
        "has shape [3, 4] of F32 (48 bytes) but data_offsets [0, 32] span 32 bytes",
    ),
    "shape-negative": (
        raw(dump_header(**{"mm_embeddings.0": entry("F32", [-2, -H], 0, 32)}), ITEM_DATA),
        "has shape [-2, -4]; expected a list of non-negative integers",
    ),
    "shape-not-a-list": (
        raw(dump_header(**{"mm_embeddings.0": entry("F32", "2x4", 0, 32)}), ITEM_DATA),
        'has shape "2x4"; expected a list of non-negative integers',
    ),
    "shape-overflowing": (
        raw(dump_header(**{"mm_embeddings.0": entry("F32", [1 << 40, 1 << 40], 0, 32)})),
        "element count overflows",
    ),
    "shape-float": (
        raw(dump_header(**{"mm_embeddings.0": entry("F32", [2.0, 4.0], 0, 32)}), ITEM_DATA),
        "has shape [2.0, 4.0]; expected a list of non-negative integers",
    ),
    "dtype-unknown": (
        raw(dump_header(**{"mm_embeddings.0": entry("F99", [2, H], 0, 32)}), ITEM_DATA),
        "tensor 'mm_embeddings.0' has unknown dtype \"F99\"",
    ),
    "dtype-not-a-string": (
        raw(dump_header(**{"mm_embeddings.0": entry(32, [2, H], 0, 32)}), ITEM_DATA),
        "has unknown dtype 32",
    ),
    "tensor-entry-missing-keys": (
        raw(dump_header(**{"mm_embeddings.0": {"dtype": "F32"}}), ITEM_DATA),
        "tensor 'mm_embeddings.0' lacks shape, data_offsets",
    ),
    "metadata-value-int": (
        raw({"__metadata__": {**META, "hidden_size": 4096}, "mm_embeddings.0": ITEM}, ITEM_DATA),
        "__metadata__['hidden_size'] is a JSON int (4096), expected a string",
    ),
    "metadata-value-null": (
        raw({"__metadata__": {**META, "model": None}, "mm_embeddings.0": ITEM}, ITEM_DATA),
        "__metadata__['model'] is a JSON NoneType (null), expected a string",
    ),
    "metadata-not-an-object": (
        raw({"__metadata__": ["mm_dump"], "mm_embeddings.0": ITEM}, ITEM_DATA),
        "__metadata__ is a JSON list, expected an object of strings",
    ),
}


@dataclass(frozen=True)
class Case:
    """One command line and the outcome it must have."""

    build: Callable[[Path], list[str]]
    code: int
    message: str


def _file(name: str, content: bytes | str) -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return path

    return make


def _check(content: bytes, *options: str) -> Callable[[Path], list[str]]:
    make = _file("dump.safetensors", content)
    return lambda tmp: ["check-embeddings", str(make(tmp)), "--device", "cpu", *options]


def _inspect(content: bytes) -> Callable[[Path], list[str]]:
    make = _file("dump.safetensors", content)
    return lambda tmp: ["inspect", str(make(tmp))]


def _compare(content: bytes) -> Callable[[Path], list[str]]:
    make = _file("cand.safetensors", content)
    return lambda tmp: ["compare", str(_good_dump(tmp)), str(make(tmp)), "--device", "cpu"]


def _good_dump(tmp_path: Path) -> Path:
    items = [torch.arange(8, dtype=torch.float32).reshape(2, H) + 1]
    return dump_encoder_outputs(tmp_path / "good.safetensors", items, expected_num_items=1)


def _symlink_loop(tmp_path: Path) -> Path:
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    a.symlink_to(b)
    b.symlink_to(a)
    return a


def _dir_named_like_a_dump(tmp_path: Path) -> Path:
    path = tmp_path / "encoder.safetensors"
    path.mkdir()
    return path


CASES: dict[str, Case] = {}
for _name, (_content, _message) in HEADER_CASES.items():
    CASES[f"check-embeddings/{_name}"] = Case(_check(_content), 2, _message)
    CASES[f"inspect/{_name}"] = Case(_inspect(_content), 2, _message)
    CASES[f"compare/{_name}"] = Case(_compare(_content), 2, _message)

# -- check-embeddings: readable safetensors that break the dump schema (exit 2) --------------
# `inspect` reads these fine (a valid safetensors file that is not a dump is exit 0, as its
# help says); see test_inspect_reports_schema_problems_without_failing below.
SCHEMA_CASES: dict[str, tuple[bytes, str]] = {
    "gap-in-item-numbering": (
        raw(
            dump_header(
                **{
                    "mm_embeddings.0": entry("F32", [1, H], 0, 16),
                    "mm_embeddings.2": entry("F32", [2, H], 16, 48),
                }
            ),
            ITEM_DATA[:16] + ITEM_DATA,
        ),
        "items must be numbered 0..2 without gaps; missing mm_embeddings.1",
    ),
    # Without format=mm_dump (with it, a dump of zero items: the masks are their slots).
    "masks-without-embeddings": (
        raw({"is_embed.0": entry("BOOL", [2], 0, 2)}, b"\x01\x01"),
        "not an mm_dump file: no mm_embeddings tensors; keys found: [is_embed.0]",
    ),
    "unexpected-tensor-names": (
        raw({"weight": ITEM}, ITEM_DATA),
        "not an mm_dump file: unexpected keys [weight]",
    ),
    "stacked-and-per-item": (
        raw(
            dump_header(
                **{
                    "mm_embeddings": entry("F32", [1, H], 0, 16),
                    "mm_embeddings.0": entry("F32", [1, H], 16, 32),
                }  # fmt: skip
            ),
            ITEM_DATA,
        ),
        "both a stacked mm_embeddings and per-item mm_embeddings.{i}",
    ),
    "metadata-format-other": (
        raw({"__metadata__": {"format": "pt"}, "mm_embeddings.0": ITEM}, ITEM_DATA),
        "metadata format='pt', expected 'mm_dump'",
    ),
    "metadata-format-version-3": (
        raw({"__metadata__": {**META, "format_version": "3"}, "mm_embeddings.0": ITEM}, ITEM_DATA),
        "mm_dump format_version '3' is not supported",
    ),
    "metadata-hidden-size-not-integer": (
        raw({"__metadata__": {**META, "hidden_size": "4k"}, "mm_embeddings.0": ITEM}, ITEM_DATA),
        "metadata hidden_size='4k' is not an integer >= 1",
    ),
    "metadata-expected-items-negative": (
        raw(
            {"__metadata__": {**META, "expected_num_items": "-1"}, "mm_embeddings.0": ITEM},
            ITEM_DATA,
        ),
        "metadata expected_num_items='-1' is not an integer >= 0",
    ),
    "metadata-dtype-unknown": (
        raw({"__metadata__": {**META, "dtype": "int7"}, "mm_embeddings.0": ITEM}, ITEM_DATA),
        "metadata dtype: unknown model dtype 'int7'",
    ),
    "item-dtype-mmcli-cannot-load": (
        raw(dump_header(**{"mm_embeddings.0": entry("F4", [2, H], 0, 4)}), b"\0" * 4),
        "tensor 'mm_embeddings.0' has dtype F4, which mmcli cannot load",
    ),
}
for _name, (_content, _message) in SCHEMA_CASES.items():
    CASES[f"check-embeddings/{_name}"] = Case(_check(_content), 2, _message)

CASES.update(
    {
        # -- check-embeddings: paths and options (exit 2) -----------------------------------
        "check-embeddings/missing-file": Case(
            lambda tmp: ["check-embeddings", str(tmp / "nope.safetensors")],
            2,
            "nope.safetensors: no such file or directory",
        ),
        "check-embeddings/directory-named-safetensors": Case(
            lambda tmp: ["check-embeddings", str(_dir_named_like_a_dump(tmp)), "--device", "cpu"],
            2,
            "encoder.safetensors: directory holds no *.safetensors files",
        ),
        "check-embeddings/symlink-loop": Case(
            lambda tmp: ["check-embeddings", str(_symlink_loop(tmp)), "--device", "cpu"],
            2,
            "Too many levels of symbolic links",
        ),
        "check-embeddings/device-tpu": Case(
            lambda tmp: ["check-embeddings", str(_good_dump(tmp)), "--device", "tpu:0"],
            2,
            "unknown device 'tpu:0'",
        ),
        "check-embeddings/device-cuda-3": Case(
            lambda tmp: ["check-embeddings", str(_good_dump(tmp)), "--device", "cuda:3"],
            2,
            "device 'cuda:3' "
            + (
                "does not exist"
                if torch.cuda.is_available() and torch.cuda.device_count() <= 3
                else "was asked for but CUDA is not available here"
            ),
        ),
        # -- check-embeddings: readable dumps that are wrong (exit 1, findings on stdout) ----
        # A float mask: the file is a readable, well-formed dump, so this is a finding about
        # the encoder outputs (SPEC's `mask-dtype`: an error finding → exit 1), not bad input.
        "check-embeddings/float-mask": Case(
            _check(
                raw(
                    dump_header(
                        **{"mm_embeddings.0": ITEM, "is_embed.0": entry("F32", [2], 32, 40)}
                    ),
                    ITEM_DATA + struct.pack("<2f", 1.0, 1.0),
                )
            ),
            1,
            "mask-dtype",
        ),
        # More masks than items: the masks are the best evidence of the expected item count.
        "check-embeddings/masks-beyond-the-items": Case(
            _check(
                raw(
                    dump_header(
                        **{
                            "mm_embeddings.0": ITEM,
                            "is_embed.0": entry("BOOL", [2], 32, 34),
                            "is_embed.1": entry("BOOL", [2], 34, 36),
                        }
                    ),
                    ITEM_DATA + b"\x01" * 4,
                )
            ),
            1,
            "1 item(s) but 2 placeholder masks for",
        ),
        "inspect/missing-file": Case(
            lambda tmp: ["inspect", str(tmp / "nope.safetensors")], 2, "no such file"
        ),
        "inspect/directory-named-safetensors": Case(
            lambda tmp: ["inspect", str(_dir_named_like_a_dump(tmp))],
            2,
            "is a directory, not a safetensors file",
        ),
        "inspect/symlink-loop": Case(
            lambda tmp: ["inspect", str(_symlink_loop(tmp))],
            2,
            "Too many levels of symbolic links",
        ),
    }
)

# -- kv-share plan ------------------------------------------------------------------------


def _layer(i: int, **kw: Any) -> dict[str, Any]:
    return {"name": f"model.layers.{i}.self_attn.attn", **kw}


def _config(defaults: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    base = {"num_kv_heads": 2, "head_size": 8, "dtype": "float16"}
    doc: dict[str, Any] = {
        "name": "toy",
        "max_model_len": 256,
        "defaults": {**base, **(defaults or {})},
        "layers": [_layer(0), _layer(1), _layer(2, kv_sharing_target=_layer(0)["name"])],
    }
    doc.update(extra)
    return doc


def _plan(content: Any, *options: str, name: str = "config.json") -> Callable[[Path], list[str]]:
    text = content if isinstance(content, bytes | str) else json.dumps(content)
    make = _file(name, text)
    return lambda tmp: ["kv-share", "plan", str(make(tmp)), *options]


def _plan_map(mapping: Any) -> Callable[[Path], list[str]]:
    make_config = _file("config.json", json.dumps(_config()))
    text = mapping if isinstance(mapping, str) else json.dumps(mapping)
    make_map = _file("map.json", text)
    return lambda tmp: ["kv-share", "plan", str(make_config(tmp)), "--map", str(make_map(tmp))]


def _hf(**kw: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "model_type": "llama",
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_size": 64,
        "max_position_embeddings": 512,
        "torch_dtype": "bfloat16",
    }
    doc.update(kw)
    return doc


def _good_plan(*options: str) -> Callable[[Path], list[str]]:
    return _plan(_config(), *options)


L0, L1, L2 = (_layer(i)["name"] for i in range(3))

CASES.update(
    {
        "kv-share/config-missing": Case(
            lambda tmp: ["kv-share", "plan", str(tmp / "nope.json")],
            2,
            "nope.json: No such file or directory",
        ),
        "kv-share/config-is-a-directory": Case(
            lambda tmp: ["kv-share", "plan", str(_dir_named_like_a_dump(tmp))],
            2,
            "holds no config.json",
        ),
        "kv-share/config-empty-json": Case(
            _plan(""), 2, "invalid JSON: Expecting value at line 1, column 1"
        ),
        "kv-share/config-empty-toml": Case(
            _plan("", name="config.toml"),
            2,
            "neither an mmcli layer config (no 'layers' list) nor a Hugging Face config",
        ),
        "kv-share/config-binary": Case(
            _plan(b"\x89PNG\r\n\x1a\n\xff\x00\x10"), 2, "not a text file (byte 0 is not UTF-8)"
        ),
        "kv-share/config-json-syntax": Case(
            _plan('{"layers": [,]}'), 2, "invalid JSON: Expecting value at line 1, column 13"
        ),
        "kv-share/config-toml-syntax": Case(
            _plan('name = "toy"\n[[layers]\n', name="config.toml"), 2, "invalid TOML"
        ),
        "kv-share/config-deeply-nested-json": Case(_plan("[" * 100_000), 2, "nested too deeply"),
        "kv-share/config-huge-integer": Case(
            _plan('{"layers": [], "max_model_len": ' + "9" * 5000 + "}"),
            2,
            "integer with too many digits",
        ),
        "kv-share/config-top-level-list": Case(
            _plan([_layer(0)]), 2, "expected an object at the top level, got list"
        ),
        "kv-share/config-layers-not-a-list": Case(
            _plan({**_config(), "layers": {"0": _layer(0)}}),
            2,
            "layers must be a non-empty list, got dict",
        ),
        "kv-share/config-layers-empty": Case(
            _plan({**_config(), "layers": []}), 2, "layers must be a non-empty list, got list"
        ),
        "kv-share/config-layer-not-an-object": Case(
            _plan({**_config(), "layers": ["model.layers.0"]}),
            2,
            "layers[0] must be an object, got str",
        ),
        "kv-share/config-heads-wrong-type": Case(
            _plan(_config({"num_kv_heads": "8"})),
            2,
            'num_kv_heads must be a positive integer, got str "8"',
        ),
        "kv-share/config-head-size-bool": Case(
            _plan(_config({"head_size": True})),
            2,
            "head_size must be a positive integer, got bool true",
        ),
        "kv-share/config-head-size-zero": Case(
            _plan(_config({"head_size": 0})), 2, "head_size must be a positive integer, got 0"
        ),
        "kv-share/config-block-size-negative": Case(
            _plan(_config({"block_size": -16})), 2, "block_size must be a positive integer, got -16"
        ),
        "kv-share/config-dtype-unknown": Case(
            _plan(_config({"dtype": "float7"})), 2, "unknown dtype 'float7'"
        ),
        "kv-share/config-attention-unknown": Case(
            _plan(_config({"attention": "diagonal"})), 2, "unknown attention type 'diagonal'"
        ),
        "kv-share/config-unknown-key": Case(_plan(_config(heads=8)), 2, "unknown key 'heads'"),
        "kv-share/config-toml-wrong-type": Case(
            _plan(
                'name = "toy"\n[defaults]\nnum_kv_heads = 2.5\nhead_size = 8\ndtype = "float16"\n'
                '[[layers]]\nname = "a"\n',
                name="config.toml",
            ),
            2,
            "num_kv_heads must be a positive integer, got float 2.5",
        ),
        "kv-share/hf-layers-zero": Case(
            _plan(_hf(num_hidden_layers=0)), 2, "num_hidden_layers must be at least 1, got 0"
        ),
        "kv-share/hf-layers-string": Case(
            _plan(_hf(num_hidden_layers="32")),
            2,
            'num_hidden_layers must be an integer, got str "32"',
        ),
        "kv-share/hf-layers-absurd": Case(
            _plan(_hf(num_hidden_layers=10**12)), 2, "num_hidden_layers is 1000000000000"
        ),
        "kv-share/hf-heads-negative": Case(
            _plan(_hf(num_key_value_heads=-2)), 2, "num_key_value_heads must be at least 1, got -2"
        ),
        "kv-share/hf-dtype-unknown": Case(
            _plan(_hf(torch_dtype="int3")), 2, "unknown dtype 'int3'"
        ),
        "kv-share/hf-layer-types-not-a-list": Case(
            _plan(_hf(layer_types="full_attention")), 2, "layer_types must be a list of strings"
        ),
        "kv-share/hf-text-config-not-an-object": Case(
            _plan(_hf(text_config=[1])), 2, "text_config must be an object, got list"
        ),
        "kv-share/map-not-an-object": Case(
            _plan_map([[L2, L0]]), 2, "the map must be a JSON object {layer: target}, got array"
        ),
        "kv-share/map-target-wrong-type": Case(
            _plan_map({L2: 0}), 2, f"the target of {L2} must be a layer name or null, got int 0"
        ),
        "kv-share/map-json-syntax": Case(_plan_map("{"), 2, "invalid JSON"),
        # Cycles: the files are well-formed and the map is wrong, so these are findings
        # (SPEC: "Invalid map → exit 1"), shown on stdout with nothing on stderr.
        "kv-share/map-cycle": Case(_plan_map({L0: L1, L1: L0}), 1, "chained-target"),
        "kv-share/config-cycle": Case(
            _plan(
                {
                    **_config(),
                    "layers": [
                        _layer(0),
                        _layer(1, kv_sharing_target=L2),
                        _layer(2, kv_sharing_target=L1),
                    ],
                }
            ),
            1,
            "chained-target",
        ),
        "kv-share/config-self-target": Case(
            _plan({**_config(), "layers": [_layer(0), _layer(1, kv_sharing_target=L1)]}),
            1,
            "self-target",
        ),
        "kv-share/config-symlink-loop": Case(
            lambda tmp: ["kv-share", "plan", str(_symlink_loop(tmp))],
            2,
            "Too many levels of symbolic links",
        ),
        # A cycle is a problem in the map being checked: its findings, exit 1 (it was exit 2
        # "could not run"); the plan without sharing is still made.
        "kv-share/config-no-layer-owns-a-cache": Case(
            _plan(
                {
                    **_config(),
                    "layers": [_layer(0, kv_sharing_target=L1), _layer(1, kv_sharing_target=L0)],
                }
            ),
            1,
            "chained-target",
        ),
        # The aliasing check allocates real blocks on cpu/cuda: refused before allocating.
        "kv-share/device-cpu-block-too-large": Case(
            _plan(_config({"num_kv_heads": 10**12, "head_size": 10**12}), "--device", "cpu"),
            2,
            "the aliasing check needs 2 block(s) of 256,000,000,000,000,000,000,000,000 bytes",
        ),
        "kv-share/memory-lots": Case(
            _good_plan("--memory", "lots"), 2, "cannot read 'lots' as a memory size"
        ),
        "kv-share/memory-zero": Case(
            _good_plan("--memory", "0GiB"), 2, "memory size '0GiB' is zero bytes"
        ),
        "kv-share/block-size-0": Case(
            _good_plan("--block-size", "0"), 2, "--block-size must be a positive integer, got 0"
        ),
        "kv-share/tensor-parallel-size-0": Case(
            _good_plan("--tensor-parallel-size", "0"),
            2,
            "--tensor-parallel-size must be a positive integer, got 0",
        ),
        "kv-share/max-model-len-negative": Case(
            _good_plan("--max-model-len", "-5"), 2, "--max-model-len must be a positive integer"
        ),
        "kv-share/kv-dtype-unknown": Case(
            _good_plan("--kv-dtype", "fp7"), 2, "--kv-dtype: unknown dtype 'fp7'"
        ),
        "kv-share/device-tpu": Case(_good_plan("--device", "tpu:0"), 2, "unknown device 'tpu:0'"),
        "kv-share/device-cuda-3": Case(
            _good_plan("--device", "cuda:3"),
            2,
            "device 'cuda:3' "
            + (
                "does not exist"
                if torch.cuda.is_available() and torch.cuda.device_count() <= 3
                else "was asked for but CUDA is not available here"
            ),
        ),
        "kv-share/emit-map-into-missing-directory": Case(
            lambda tmp: [
                *_good_plan()(tmp),
                "--emit-map",
                str(tmp / "no" / "such" / "map.json"),
            ],
            2,
            "is not a directory",
        ),
    }
)

# -- bench --------------------------------------------------------------------------------


def _bench(*options: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["bench", "--device", "cpu", "--min-time", "0.001", *options]


CASES.update(
    {
        "bench/placeholders-abc": Case(_bench("--placeholders", "abc"), 2, "'abc'"),
        "bench/placeholders-negative": Case(_bench("--placeholders", "576,-1"), 2, "'-1'"),
        "bench/placeholders-empty": Case(
            _bench("--placeholders", ""), 2, "--placeholders is empty"
        ),
        "bench/hidden-0": Case(_bench("--hidden", "0"), 2, "--hidden must be at least 1, got 0"),
        "bench/threads-0": Case(_bench("--threads", "0"), 2, "--threads must be at least 1, got 0"),
        "bench/min-time-0": Case(
            _bench("--min-time", "0"), 2, "--min-time must be a positive number of seconds, got 0"
        ),
        "bench/min-time-nan": Case(
            _bench("--min-time", "nan"),
            2,
            "--min-time must be a positive number of seconds, got nan",
        ),
        "bench/layout-unknown": Case(_bench("--layout", "diagonal"), 2, "'diagonal'"),
        "bench/impl-unknown": Case(_bench("--impl", "reference,turbo"), 2, "'turbo'"),
        "bench/op-unknown": Case(_bench("--op", "merge"), 2, "'merge'"),
        "bench/dtype-unknown": Case(_bench("--dtype", "int8"), 2, "unknown dtype 'int8'"),
        "bench/device-tpu": Case(
            lambda tmp: ["bench", "--device", "tpu:0"], 2, "unknown device 'tpu:0'"
        ),
        "bench/device-cuda-3": Case(
            lambda tmp: ["bench", "--device", "cuda:3"],
            2,
            "device 'cuda:3' "
            + (
                "does not exist"
                if torch.cuda.is_available() and torch.cuda.device_count() <= 3
                else "was asked for but CUDA is not available here"
            ),
        ),
        "bench/from-missing": Case(
            lambda tmp: [*_bench()(tmp), "--from", str(tmp / "nope.safetensors")],
            2,
            "no such file",
        ),
        "bench/from-corrupt": Case(
            lambda tmp: [
                *_bench()(tmp),
                "--from",
                str(_file("d.safetensors", raw(b"{}", length=1 << 40))(tmp)),
            ],
            2,
            "header declares an absurd length",
        ),
        "bench/from-with-hidden": Case(
            lambda tmp: [*_bench("--hidden", "64")(tmp), "--from", str(_good_dump(tmp))],
            2,
            "--hidden cannot be combined with --from",
        ),
    }
)


def _run(args: list[str]) -> tuple[Any, float]:
    start = time.monotonic()
    result = runner.invoke(app, args, catch_exceptions=False)
    return result, time.monotonic() - start


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    args = case.build(tmp_path)
    result, elapsed = _run(args)
    out, err = result.stdout, result.stderr
    assert "Traceback" not in out + err
    assert elapsed < TIME_LIMIT_S, f"{name} took {elapsed:.1f} s"
    assert result.exit_code == case.code, (out, err)
    if case.code == 2:
        lines = err.splitlines()
        assert len(lines) == 2, err
        assert lines[0].startswith("error: "), err
        assert lines[1].startswith("hint: ") and len(lines[1]) > len("hint: "), err
        assert case.message in lines[0], err
        assert out == "", out
    else:
        # Exit 1: the input was read and checked; the problem is a finding, on stdout.
        assert err == "", err
        assert case.message in out, out


def assert_error_document(out: str, code: int, first_error_line: str) -> dict[str, Any]:
    """``out`` is exactly one JSON document (``json.loads`` refuses trailing data) with the
    error of every command's error document, the same as the ``error:`` line on stderr."""
    doc = json.loads(out)
    assert isinstance(doc, dict), out
    assert {"error", "hint", "input", "exit_code"} <= doc.keys(), doc
    assert doc["exit_code"] == code, doc
    assert first_error_line == f"error: {doc['error']}", (first_error_line, doc)
    return doc


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.code == 2))
def test_bad_input_as_json(tmp_path: Path, name: str) -> None:
    """The same corpus with ``--format json``: the same two lines on stderr, and on stdout
    one JSON document carrying the error, its hint and the exit code."""
    case = CASES[name]
    result, elapsed = _run([*case.build(tmp_path), "--format", "json"])
    out, err = result.stdout, result.stderr
    assert "Traceback" not in out + err
    assert elapsed < TIME_LIMIT_S, f"{name} took {elapsed:.1f} s"
    assert result.exit_code == 2, (out, err)
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert case.message in lines[0], err
    doc = assert_error_document(out, 2, lines[0])
    assert lines[1] == f"hint: {doc['hint']}", (lines[1], doc)


def test_the_corpus_covers_every_command() -> None:
    commands = {name.split("/")[0] for name in CASES}
    assert commands == {"check-embeddings", "inspect", "kv-share", "bench", "compare"}
    assert len(CASES) >= 45


@pytest.mark.parametrize("name", sorted(SCHEMA_CASES))
def test_inspect_reports_schema_problems_without_failing(tmp_path: Path, name: str) -> None:
    """A readable safetensors file that is not a valid dump: `inspect` shows why, exit 0."""
    content, message = SCHEMA_CASES[name]
    path = _file("dump.safetensors", content)(tmp_path)
    result, elapsed = _run(["inspect", str(path), "--format", "json"])
    assert elapsed < TIME_LIMIT_S
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    if name == "item-dtype-mmcli-cannot-load":  # the schema holds; only loading would fail
        assert doc["dump"]["follows_schema"] is True
    else:
        assert doc["dump"]["follows_schema"] is False
        assert message in doc["dump"]["problem"]


@pytest.mark.parametrize(
    "name", ["header-length-2^40", "data-offsets-overlapping", "dtype-unknown"]
)
def test_json_mode_prints_one_document_and_the_error_on_stderr(tmp_path: Path, name: str) -> None:
    content, message = HEADER_CASES[name]
    path = _file("dump.safetensors", content)(tmp_path)
    result, _ = _run(["check-embeddings", str(path), "--device", "cpu", "--format", "json"])
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert doc["exit_code"] == 2 and doc["files"][0]["status"] == "error"
    assert message in doc["files"][0]["error"]["message"]
    assert message in result.stderr.splitlines()[0]
