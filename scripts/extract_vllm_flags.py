"""Write mmcli/kv/data/vllm_serve_flags.json: the flags ``vllm serve`` takes in each release.

Usage: ``python scripts/extract_vllm_flags.py /tmp/vsrc`` where ``/tmp/vsrc/<version>/vllm/`` holds
the python files of the released wheel ``vllm==<version>`` (unzipped, nothing imported).

Each release's flags are read with :mod:`ast` from its own argument definitions:
``vllm/engine/arg_utils.py`` (``EngineArgs.add_cli_args``, ``AsyncEngineArgs.add_cli_args``), the
serve front end (``make_arg_parser`` and the ``FrontendArgs`` dataclass, whose fields become
``--kebab-case`` flags) in ``vllm/entrypoints/{openai,launchers,common}/cli_args.py``.
A flag made from a config dataclass field
(``add_argument("--max-model-len", **model_kwargs["max_model_len"])`` with
``model_kwargs = get_kwargs(ModelConfig)``) takes its kind from the field's annotation, as vLLM's
``get_kwargs`` does: a dataclass field takes JSON, a ``bool`` field is a ``--x / --no-x`` pair
(``bool | str | None`` takes an optional value), a ``Literal`` one value, a list, tuple or set
field one or more values (``nargs="+"``), a dict field JSON, anything else one value; the serve
front end's ``_customize_cli_kwargs`` turns some list fields back into JSON or one value.

Each release is stored whole for the newest and as a delta (``added`` / ``removed`` flags) to
the next newer release for the others, which keeps the file small.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "mmcli" / "kv" / "data" / "vllm_serve_flags.json"
FRONTEND_FILES = (
    "vllm/entrypoints/openai/cli_args.py",
    "vllm/entrypoints/launchers/cli_args.py",
    "vllm/entrypoints/common/cli_args.py",
)
ENGINE_FILE = "vllm/engine/arg_utils.py"


def version_key(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def class_fields(root: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Every class under vllm/config (and the args files): its bases and annotated fields."""
    files = [*root.glob("vllm/config/*.py"), root / "vllm/config.py", root / ENGINE_FILE]
    files += [root / f for f in FRONTEND_FILES]
    found: dict[str, tuple[list[str], dict[str, str]]] = {}
    for path in files:
        if not path.is_file():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                names = {}
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        names[item.target.id] = ast.unparse(item.annotation)
                bases = [ast.unparse(b) for b in node.bases]
                found.setdefault(node.name, (bases, names))
    return found


def annotation_of(classes: dict[str, Any], cls: str, name: str) -> str | None:
    seen = set()
    while cls in classes and cls not in seen:
        seen.add(cls)
        bases, names = classes[cls]
        if name in names:
            return str(names[name])
        cls = next((b for b in bases if b in classes), "")
    return None


def kind_of(annotation: str | None, classes: dict[str, Any]) -> str:
    """bool (a --x / --no-x pair), json, optional (a bare flag or a value) or value."""
    if annotation is None:
        return "value"
    tokens = set(annotation.replace("[", " ").replace("]", " ").replace("|", " ").split())
    tokens = {t.strip(",'\"") for t in tokens}
    if "bool" in tokens:
        return "optional" if "str" in tokens else "bool"
    configs = {t for t in tokens if t in classes and t.endswith("Config")}
    if configs:
        return "json"
    members = union_members(annotation)
    if "Literal" not in members and members & {"list", "List", "tuple", "Tuple", "set", "Set"}:
        return "list"
    if tokens & {"dict", "Dict"} or "dict[" in annotation:
        return "json"
    return "value"


def union_members(annotation: str) -> set[str]:
    """The outer names of a union's members, as vLLM's ``get_type_hints`` splits it:
    ``list[int] | None`` → {"list", "None"}; ``Annotated[X, ...]`` is X."""
    try:
        node = ast.parse(annotation, mode="eval").body
    except SyntaxError:
        return set()

    def members(node: ast.expr) -> set[str]:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return members(node.left) | members(node.right)
        if isinstance(node, ast.Subscript):
            outer = ast.unparse(node.value).split(".")[-1]
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if outer in ("Union", "Optional"):
                return set().union(*(members(a) for a in args)) | (
                    {"None"} if outer == "Optional" else set()
                )
            if outer == "Annotated":
                return members(args[0])
            return {outer}
        return {ast.unparse(node).split(".")[-1]}

    return members(node)


def frontend_overrides(tree: ast.Module) -> dict[str, str]:
    """What the front end changes in its fields' kwargs (``FrontendArgs.add_cli_args``, from
    later ``_customize_cli_kwargs``): ``frontend_kwargs["x"]["type"] = json.loads``
    makes a JSON flag, ``del frontend_kwargs["x"]["nargs"]`` or an ``append`` action one value
    per use."""
    kinds: dict[str, str] = {}

    def field_of(node: ast.expr) -> str | None:
        # frontend_kwargs["x"]["nargs"] -> ("x", "nargs")
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Subscript):
            outer, inner = node.value.slice, node.slice
            if isinstance(outer, ast.Constant) and isinstance(inner, ast.Constant):
                return f"{outer.value}:{inner.value}"
        return None

    for func in ast.walk(tree):
        if not (isinstance(func, ast.FunctionDef) and "frontend_kwargs" in ast.unparse(func)):
            continue
        for node in ast.walk(func):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Delete):
                targets = node.targets
            elif isinstance(node, ast.Assign):
                targets = node.targets
            for target in targets:
                key = field_of(target)
                if key is None:
                    continue
                field, part = key.split(":")
                value = ast.unparse(node.value) if isinstance(node, ast.Assign) else ""
                if part == "type" and "json.loads" in value:
                    kinds[field] = "json"
                elif part == "nargs" or (part == "action" and "append" in value):
                    kinds.setdefault(field, "value")
    return kinds


def call_flags(call: ast.Call, kwargs_of: dict[str, str], classes: dict[str, Any]) -> dict:
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not names or not names[0].startswith("-"):
        return {}
    dest, kind = None, None
    for kw in call.keywords:
        value = kw.value
        if kw.arg is None:  # **model_kwargs["max_model_len"] or **{**kwargs["x"], ...}
            subs = [value] if isinstance(value, ast.Subscript) else []
            if isinstance(value, ast.Dict):
                subs = [v for k, v in zip(value.keys, value.values, strict=True) if k is None]
            for sub in subs:
                if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name):
                    field = sub.slice
                    if isinstance(field, ast.Constant) and sub.value.id in kwargs_of:
                        dest = field.value
                        cls = kwargs_of[sub.value.id]
                        kind = kind_of(annotation_of(classes, cls, dest), classes)
        elif kw.arg == "dest" and isinstance(value, ast.Constant):
            dest = value.value
        elif kw.arg == "action":
            text = ast.unparse(value)
            if "BooleanOptionalAction" in text:
                kind = "bool"
            elif "store_true" in text or "store_false" in text:
                kind = "flag"
        elif kw.arg == "type" and "json.loads" in ast.unparse(value):
            kind = "json"
        elif kw.arg == "nargs" and ast.unparse(value) == "'?'" and kind is None:
            kind = "optional"
        elif kw.arg == "nargs" and ast.unparse(value) in ("'+'", "'*'") and kind is None:
            kind = "list"
    longs = [n for n in names if n.startswith("--")]
    if dest is None:
        dest = (longs or names)[0].lstrip("-").replace("-", "_")
    return {"names": names, "dest": dest, "kind": kind or "value"}


def function_flags(func: ast.FunctionDef, classes: dict[str, Any]) -> list[dict]:
    kwargs_of: dict[str, str] = {}  # model_kwargs -> ModelConfig
    flags = []
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value
            if ast.unparse(call.func) == "get_kwargs" and call.args:
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        kwargs_of[target.id] = ast.unparse(call.args[0])
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flag = call_flags(node, kwargs_of, classes)
            if flag:
                flags.append(flag)
    return flags


def release_flags(root: Path) -> tuple[dict[str, dict], list[str]]:
    classes = class_fields(root)
    flags: list[dict] = []
    read = [ENGINE_FILE]
    tree = ast.parse((root / ENGINE_FILE).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in ("EngineArgs", "AsyncEngineArgs"):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "add_cli_args":
                    flags += function_flags(item, classes)
    overrides: dict[str, str] = {}
    for name in FRONTEND_FILES:
        path = root / name
        if not path.is_file():
            continue
        read.append(name)
        tree = ast.parse(path.read_text())
        overrides |= frontend_overrides(tree)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == "make_arg_parser":
                flags += function_flags(node, classes)
        for cls in ("FrontendArgs",):
            seen: set[str] = set()
            while cls in classes and cls not in seen:
                seen.add(cls)
                bases, fields = classes[cls]
                for field, annotation in fields.items():
                    kind = overrides.get(field) or kind_of(annotation, classes)
                    flags.append(
                        {"names": ["--" + field.replace("_", "-")], "dest": field, "kind": kind}
                    )
                cls = next((b for b in bases if b in classes), "")
    table: dict[str, dict] = {}
    for flag in flags:
        entry = {"dest": flag["dest"], "kind": flag["kind"]}
        aliases = flag["names"][1:]
        if aliases:
            entry["aliases"] = aliases
        table.setdefault(flag["names"][0], entry)
    return dict(sorted(table.items())), read


def main(source: str) -> None:
    roots = sorted(
        (p for p in Path(source).iterdir() if (p / ENGINE_FILE).is_file()),
        key=lambda p: version_key(p.name),
    )
    whole: dict[str, dict[str, dict]] = {}
    files: dict[str, list[str]] = {}
    for root in roots:
        whole[root.name], files[root.name] = release_flags(root)
    versions = [r.name for r in roots]
    newest = versions[-1]
    releases: dict[str, Any] = {newest: {"flags": whole[newest]}}
    for older, newer in zip(versions[:-1], versions[1:], strict=True):
        a, b = whole[older], whole[newer]
        added = {k: v for k, v in a.items() if b.get(k) != v}
        releases[older] = {"base": newer, "added": added, "removed": sorted(set(b) - set(a))}
    doc = {
        "provenance": {
            "script": "scripts/extract_vllm_flags.py",
            "wheels": {v: f"vllm=={v} (PyPI wheel, python files)" for v in versions},
            "files_read": files,
            "kinds": "bool: --x and --no-x; flag: store_true; json: a JSON value; "
            "optional: bare or a value; value: one value; list: one or more values",
        },
        "newest": newest,
        "releases": releases,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes, {len(versions)} releases)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/vsrc")
