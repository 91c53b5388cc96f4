"""A small Hugging Face Hub on 127.0.0.1 for the tests: no internet, every request counted.

It answers the three kinds of request ``huggingface_hub`` makes here: ``HEAD``/``GET`` of
``/{repo}/resolve/{revision}/{file}`` (with ``X-Repo-Commit``, ``ETag`` and ``Range`` support),
and ``GET /api/models/{repo}/tree/{revision}`` (the file list). Errors carry the Hub's
``X-Error-Code`` header (``RepoNotFound``, ``GatedRepo``, ``RevisionNotFound``,
``EntryNotFound``), which is how the library tells them apart.

A weight file is virtual: its header is real and its body is zeros, produced on demand, so a
checkpoint may declare gigabytes. The server counts the bytes it serves of each file past the
header: a test fails if any weight byte beyond a range read's first block is asked for.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

TOKEN = "hf_fake_token_for_tests"


@dataclass
class VirtualFile:
    """``head`` bytes, then zeros up to ``size``."""

    head: bytes
    size: int

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``start`` .. ``end`` inclusive."""
        end = min(end, self.size - 1)
        if start > end:
            return b""
        real = self.head[start : end + 1]
        return real + b"\0" * (end + 1 - start - len(real))


@dataclass
class Repo:
    files: dict[str, VirtualFile]
    commit: str
    gated: bool = False
    branches: tuple[str, ...] = ("main",)
    #: What ``/api/models/{repo}/tree/{revision}`` answers instead of the listing (with status
    #: 200 and this content type): a malformed answer, as a proxy or a broken mirror gives.
    tree_answer: tuple[bytes, str] | None = None


@dataclass
class Hub:
    """The repos served, and a log of every request (method, path, range)."""

    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    #: Bytes of a ``.safetensors`` file served past its header, by file path.
    weight_bytes: dict[str, int] = field(default_factory=dict)
    url: str = ""

    def add(self, repo: str, files: dict[str, bytes | VirtualFile], **kwargs: Any) -> Repo:
        commit = hashlib.sha1(repo.encode()).hexdigest()
        served = {
            name: f if isinstance(f, VirtualFile) else VirtualFile(f, len(f))
            for name, f in files.items()
        }
        self.repos[repo] = Repo(served, commit, **kwargs)
        return self.repos[repo]


def safetensors_file(tensors: dict[str, tuple[str, list[int]]]) -> VirtualFile:
    """A ``.safetensors`` file whose header declares ``tensors`` (name → dtype, shape)."""
    sizes = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "I64": 8}
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    head = struct.pack("<Q", len(raw)) + raw
    return VirtualFile(head, len(head) + offset)


_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_TREE = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)$")


def _handler(hub: Hub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet
            return None

        def do_HEAD(self) -> None:
            self._serve(body=False)

        def do_GET(self) -> None:
            self._serve(body=True)

        def _error(self, status: int, code: str, message: str) -> None:
            data = json.dumps({"error": message}).encode()
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(data)

        def _repo(self, name: str, rev: str) -> Repo | None:
            repo = hub.repos.get(name)
            if repo is None:
                self._error(404, "RepoNotFound", "Repository not found")
                return None
            auth = self.headers.get("Authorization", "")
            if repo.gated and auth != f"Bearer {TOKEN}":
                self._error(401, "GatedRepo", "Access to this model is restricted")
                return None
            if rev not in repo.branches and rev != repo.commit:
                self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
                return None
            return repo

        def _serve(self, body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            rng = self.headers.get("Range")
            hub.requests.append((self.command, path, rng))
            if m := _TREE.match(path):
                repo = self._repo(m["repo"], m["rev"])
                if repo is None:
                    return
                if repo.tree_answer is not None:
                    self._send(200, repo.tree_answer[0], repo.tree_answer[1], body)
                    return
                listing = [
                    {"type": "file", "path": n, "size": f.size, "oid": hashlib.sha1(n.encode())}
                    for n, f in sorted(repo.files.items())
                ]
                for entry in listing:
                    entry["oid"] = entry["oid"].hexdigest()  # type: ignore[attr-defined]
                self._send(200, json.dumps(listing).encode(), "application/json", body)
                return
            m = _RESOLVE.match(path)
            if m is None:
                self._error(404, "EntryNotFound", "no such route")
                return
            repo = self._repo(m["repo"], m["rev"])
            if repo is None:
                return
            file = repo.files.get(m["file"])
            if file is None:
                self._error(404, "EntryNotFound", f"{m['file']} does not exist")
                return
            start, end, status = 0, file.size - 1, 200
            if rng and (r := re.match(r"bytes=(\d+)-(\d*)", rng)):
                start = int(r[1])
                end = min(int(r[2]) if r[2] else file.size - 1, file.size - 1)
                status = 206
            extra = {
                "X-Repo-Commit": repo.commit,
                "ETag": '"' + hashlib.sha1(file.head).hexdigest() + '"',
            }
            if status == 206:
                extra["Content-Range"] = f"bytes {start}-{end}/{file.size}"
            if body and m["file"].endswith(".safetensors"):
                past = max(0, end + 1 - max(start, len(file.head)))
                hub.weight_bytes[path] = hub.weight_bytes.get(path, 0) + past
            data = file.read(start, end) if body else b""
            length = end + 1 - start
            self._send(status, data, "application/octet-stream", body, length, extra)

        def _send(
            self,
            status: int,
            data: bytes,
            ctype: str,
            body: bool,
            length: int | None = None,
            extra: dict[str, str] | None = None,
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data) if length is None else length))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if body:
                self.wfile.write(data)

    return Handler


class Serving:
    """``with Serving(hub) as url:`` — the hub on a free port of 127.0.0.1."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
        self.server.daemon_threads = True

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        host, port = self.server.server_address[:2]
        self.hub.url = f"http://{host!s}:{port}"
        return self.hub.url

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
