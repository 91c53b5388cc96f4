"""``kv-share plan MODEL``: a config file, a local model folder, or a Hub repo id (fake Hub).

Each command runs in a subprocess whose ``HF_ENDPOINT`` points at the fake Hub of
:mod:`fake_hub` (``huggingface_hub`` reads the variable at import) and whose ``HF_HOME`` is a
fresh cache, with the working directory a temporary folder (so ``org/name`` is not a local
path). Figures: the Llama-3.3-70B config is the published one (tests/kv/realworld/configs,
PROVENANCE.md); 141,107,412,992 bytes is the ``metadata.total_size`` of the Llama-3.1/3.3-70B
``model.safetensors.index.json`` (same geometry).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_hub import TOKEN, Hub, Serving, safetensors_file

ROOT = Path(__file__).resolve().parents[3]
LLAMA70 = ROOT / "tests/kv/realworld/configs/meta-llama--Llama-3.3-70B-Instruct_config.json"
LLAMA70_BYTES = 141_107_412_992
INDEX = "model.safetensors.index.json"
PROCESSOR = "preprocessor_config.json"


def _index(total: int) -> bytes:
    weight_map = {"model.embed_tokens.weight": "model-00001-of-00030.safetensors"}
    return json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}).encode()


#: A small model's config (Qwen3 geometry, 2 layers) and its one-file checkpoint's tensors.
TINY = {
    "model_type": "qwen3",
    "architectures": ["Qwen3ForCausalLM"],
    "hidden_size": 1024,
    "num_hidden_layers": 2,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 3072,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
}
TINY_TENSORS = {
    "model.embed_tokens.weight": ("BF16", [151936, 1024]),
    "model.layers.0.mlp.up_proj.weight": ("BF16", [3072, 1024]),
    "model.layers.1.mlp.up_proj.weight": ("BF16", [3072, 1024]),
}
TINY_BYTES = 2 * (151936 * 1024 + 2 * 3072 * 1024)


@pytest.fixture
def hub() -> Iterator[Hub]:
    hub = Hub()
    config = LLAMA70.read_bytes()
    shards = {f"model-{i:05d}-of-00030.safetensors": safetensors_file(TINY_TENSORS) for i in (1,)}
    hub.add("meta/llama-70b", {"config.json": config, INDEX: _index(LLAMA70_BYTES), **shards})
    hub.add(
        "meta/llama-70b-gated", {"config.json": config, INDEX: _index(LLAMA70_BYTES)}, gated=True
    )
    tiny = json.dumps(TINY).encode()
    hub.add(
        "acme/tiny",
        {"config.json": tiny, "model.safetensors": safetensors_file(TINY_TENSORS)},
        branches=("main", "v1"),
    )
    hub.add("acme/no-config", {"README.md": b"# a dataset card", "tokenizer.json": b"{}"})
    hub.add("acme/no-weights", {"config.json": tiny, "pytorch_model.bin": b"\0" * 64})
    with Serving(hub):
        yield hub


def mmcli(
    hub: Hub | None, cwd: Path, *args: str, offline: bool = False, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    environ |= {
        "HF_HOME": str(cwd / "hf-home"),
        "HF_ENDPOINT": hub.url if hub is not None else env.pop("endpoint"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_XET": "1",
        "PYTHONPATH": str(ROOT),
        **env,
    }
    if offline:
        environ["HF_HUB_OFFLINE"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "mmcli", "kv-share", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environ,
        timeout=120,
    )


def refused(proc: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    """The error and hint lines of a clean refusal (exit 2, nothing else)."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: "), proc.stderr
    return lines[0], lines[1]


def plan_json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode in (0, 1), proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """The plan without what says where its inputs came from."""
    out = {k: v for k, v in doc.items() if k != "model_source"}
    if "memory_estimate" in out:
        out["memory_estimate"] = {
            k: v for k, v in out["memory_estimate"].items() if k != "weights_source"
        }
    return out


GPU = ("--gpu", "H100", "-tp", "4", "--max-model-len", "32768", "--format", "json")


def test_a_repo_id_plans_as_the_file_with_its_weights(hub: Hub, tmp_path: Path) -> None:
    by_id = plan_json(mmcli(hub, tmp_path, "plan", "meta/llama-70b", *GPU))
    by_file = plan_json(
        mmcli(hub, tmp_path, "plan", str(LLAMA70), *GPU, "--weights", f"{LLAMA70_BYTES}B")
    )
    assert comparable(by_id) == comparable(by_file)
    est = by_id["memory_estimate"]
    assert est["weights_bytes"] == LLAMA70_BYTES and est["weights_estimated"] is False
    assert INDEX in est["weights_source"] and "meta/llama-70b@" in est["weights_source"]
    source = by_id["model_source"]
    assert (source["kind"], source["repo"]) == ("hub", "meta/llama-70b")
    assert source["commit"] == hub.repos["meta/llama-70b"].commit
    # config.json and the index: a HEAD and a GET each, and not one byte of a weight file.
    files = sorted({path.rsplit("/", 1)[1] for _, path, _ in hub.requests})
    assert files == ["config.json", INDEX], hub.requests
    assert len(hub.requests) == 4, hub.requests
    assert not hub.weight_bytes
    # Again, with both files cached: one HEAD each (is the cache current?), no GET.
    again = plan_json(mmcli(hub, tmp_path, "plan", "meta/llama-70b", *GPU))
    assert again == by_id
    assert [method for method, _, _ in hub.requests[4:]] == ["HEAD", "HEAD"], hub.requests


def test_the_text_report_names_the_repo_and_commit(hub: Hub, tmp_path: Path) -> None:
    proc = mmcli(hub, tmp_path, "plan", "meta/llama-70b", "--gpu", "H100", "-tp", "4")
    assert proc.returncode in (0, 1), proc.stderr
    commit = hub.repos["meta/llama-70b"].commit[:12]
    assert f"model: meta/llama-70b@{commit} (config.json, Hugging Face Hub)" in proc.stdout
    assert f"weights: meta/llama-70b@{commit}: {INDEX} (metadata.total_size)" in proc.stdout


def test_a_one_file_checkpoint_is_read_by_range_requests(hub: Hub, tmp_path: Path) -> None:
    doc = plan_json(mmcli(hub, tmp_path, "plan", "acme/tiny", "--gpu", "L40S", "--format", "json"))
    assert doc["memory_estimate"]["weights_bytes"] == TINY_BYTES
    assert "model.safetensors header" in doc["memory_estimate"]["weights_source"]
    gets = [(path, rng) for method, path, rng in hub.requests if method == "GET"]
    assert all(rng is not None for path, rng in gets if path.endswith(".safetensors")), gets
    # The first range read is 100 KB; the header is smaller, so some zeros come with it, but
    # never the 300 MiB of weights the header declares.
    assert sum(hub.weight_bytes.values()) < 100_001


def test_gated_needs_the_token(hub: Hub, tmp_path: Path) -> None:
    error, hint = refused(mmcli(hub, tmp_path, "plan", "meta/llama-70b-gated"))
    assert "meta/llama-70b-gated is gated" in error
    assert "accept the license" in hint and "HF_TOKEN" in hint and "hf auth login" in hint
    proc = mmcli(hub, tmp_path, "plan", "meta/llama-70b-gated", *GPU, HF_TOKEN=TOKEN)
    assert plan_json(proc)["memory_estimate"]["weights_bytes"] == LLAMA70_BYTES


def test_missing_repo_revision_config_and_weights(hub: Hub, tmp_path: Path) -> None:
    error, _ = refused(mmcli(hub, tmp_path, "plan", "meta/nope"))
    assert "no Hub repo meta/nope" in error
    error, hint = refused(mmcli(hub, tmp_path, "plan", "acme/tiny", "--revision", "v9"))
    assert "has no revision v9" in error and "--revision" in hint
    error, _ = refused(mmcli(hub, tmp_path, "plan", "acme/no-config"))
    assert "has no config.json (its files: README.md, tokenizer.json)" in error
    error, hint = refused(mmcli(hub, tmp_path, "plan", "acme/no-weights", "--gpu", "H100"))
    assert "no safetensors" in error and "pytorch_model.bin" in error and "--weights" in hint


def test_revision_is_read(hub: Hub, tmp_path: Path) -> None:
    doc = plan_json(
        mmcli(hub, tmp_path, "plan", "acme/tiny", "--revision", "v1", "--format", "json")
    )
    assert doc["model_source"]["revision"] == "v1"
    assert any("/resolve/v1/config.json" in path for _, path, _ in hub.requests)


def test_offline_after_a_first_run(hub: Hub, tmp_path: Path) -> None:
    online = plan_json(mmcli(hub, tmp_path, "plan", "meta/llama-70b", *GPU))
    seen = len(hub.requests)
    offline = plan_json(mmcli(hub, tmp_path, "plan", "meta/llama-70b", *GPU, offline=True))
    assert offline == online
    assert len(hub.requests) == seen  # from the cache, not one request


def test_offline_with_an_empty_cache(hub: Hub, tmp_path: Path) -> None:
    error, hint = refused(mmcli(hub, tmp_path, "plan", "meta/llama-70b", offline=True))
    assert "HF_HUB_OFFLINE is set and the cache holds no config.json of meta/llama-70b" in error
    assert "HF_HUB_OFFLINE" in hint
    assert not hub.requests


def test_an_unreachable_endpoint(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    proc = mmcli(None, tmp_path, "plan", "meta/llama-70b", endpoint=endpoint)
    error, hint = refused(proc)
    assert f"cannot reach the Hub at {endpoint}" in error and "HF_ENDPOINT" in hint


def test_a_local_folder(hub: Hub, tmp_path: Path) -> None:
    folder = tmp_path / "llama-70b"
    folder.mkdir()
    (folder / "config.json").write_bytes(LLAMA70.read_bytes())
    (folder / INDEX).write_bytes(_index(LLAMA70_BYTES))
    doc = plan_json(mmcli(hub, tmp_path, "plan", "llama-70b", *GPU))
    assert doc["model_source"] == {
        "kind": "folder",
        "config": str(Path("llama-70b") / "config.json"),
        "folder": "llama-70b",
    }
    assert doc["memory_estimate"]["weights_bytes"] == LLAMA70_BYTES
    assert not hub.requests  # a local path wins over the repo id it looks like
    online = plan_json(mmcli(hub, tmp_path, "plan", "meta/llama-70b", *GPU))
    assert comparable(online) == comparable(doc)


def test_a_local_path_wins_and_takes_no_revision(hub: Hub, tmp_path: Path) -> None:
    (tmp_path / "meta" / "llama-70b").mkdir(parents=True)
    (tmp_path / "meta" / "llama-70b" / "config.json").write_bytes(json.dumps(TINY).encode())
    doc = plan_json(mmcli(hub, tmp_path, "plan", "meta/llama-70b", "--format", "json"))
    assert doc["model_source"]["kind"] == "folder" and not hub.requests
    error, _ = refused(mmcli(hub, tmp_path, "plan", "meta/llama-70b", "--revision", "main"))
    assert "--revision is for a Hub repo id" in error


def test_weights_from_a_repo_id(hub: Hub, tmp_path: Path) -> None:
    proc = mmcli(hub, tmp_path, "plan", str(LLAMA70), *GPU, "--weights", "meta/llama-70b")
    assert plan_json(proc)["memory_estimate"]["weights_bytes"] == LLAMA70_BYTES


def test_explain_takes_a_model(hub: Hub, tmp_path: Path) -> None:
    log = ROOT / "tests/kv/vllm_logs"
    logs = sorted(log.glob("*.log"))
    assert logs
    proc = mmcli(hub, tmp_path, "explain", str(logs[0]), "--model", "meta/nope")
    error, _ = refused(proc)
    assert "no Hub repo meta/nope" in error


def test_a_malformed_safetensors_answer_is_bad_input(hub: Hub, tmp_path: Path) -> None:
    # Before: an HTML page where the header was expected was an internal error (exit 3).
    config = json.dumps(TINY).encode()
    hub.add("acme/html", {"config.json": config, "model.safetensors": b"<html>busy</html>"})
    error, hint = refused(mmcli(hub, tmp_path, "plan", "acme/html", "--gpu", "H100"))
    assert "the Hub's answer for model.safetensors of acme/html is malformed" in error
    assert "header" in error and "HF_ENDPOINT" in hint


@pytest.mark.parametrize(
    ("answer", "ctype"),
    [
        (b"<html><body>503 Service Unavailable</body></html>", "text/html"),
        (b'[{"type": "file", "path": "config.js', "application/json"),  # truncated
        (b'{"files": ["config.json"]}', "application/json"),  # an object, not a list
        (b'[{"type": "file"}]', "application/json"),  # an entry without its path
        (b'["config.json", 3]', "application/json"),  # entries that are not objects
    ],
    ids=["html", "truncated", "object", "no-path", "not-objects"],
)
def test_a_malformed_file_list_is_bad_input(
    hub: Hub, tmp_path: Path, answer: bytes, ctype: str
) -> None:
    """The file list (``GET /api/models/{repo}/tree/{revision}``) is read when the repo has no
    safetensors index: a 200 that is not the Hub's listing is exit 2 naming the request."""
    tiny = json.dumps(TINY).encode()
    repo = hub.add("acme/listing", {"config.json": tiny, "pytorch_model.bin": b"\0" * 64})
    repo.tree_answer = (answer, ctype)
    error, hint = refused(mmcli(hub, tmp_path, "plan", "acme/listing", "--gpu", "H100"))
    assert "the file list of acme/listing" in error and "malformed" in error
    assert "HF_ENDPOINT" in hint


def test_a_repo_ids_processor_sizes_the_encoder_profile(tmp_path: Path) -> None:
    """A multimodal repo's preprocessor_config.json is fetched beside its config: its
    max_pixels sizes Qwen2.5-VL's dummy image (16,384 tokens; at max_model_len 32,768 the video
    of four frames, 32,768 tokens, vLLM 0.20.0 qwen2_vl.py). Without the file the encoder
    profile is named, not estimated, and a note says which setting is missing. Files:
    tests/kv/whatif/models/qwen2_5_vl_7b (PROVENANCE.md there)."""
    folder = ROOT / "tests/kv/whatif/models/qwen2_5_vl_7b"
    config = (folder / "config.json").read_bytes()
    hub = Hub()
    hub.add(
        "qwen/vl",
        {"config.json": config, "preprocessor_config.json": (folder / PROCESSOR).read_bytes()},
    )
    hub.add("qwen/vl-bare", {"config.json": config})
    args = ("--gpu", "H100", "--weights", "15.6GiB", "--vllm-version", "0.20")
    args += ("--max-model-len", "32768", "--format", "json")
    with Serving(hub):
        full = plan_json(mmcli(hub, tmp_path, "plan", "qwen/vl", *args))
        bare = plan_json(mmcli(hub, tmp_path, "plan", "qwen/vl-bare", *args))

    def encoder(doc: dict[str, Any]) -> dict[str, Any]:
        parts = doc["memory_estimate"]["components"]
        (part,) = [p for p in parts if p["name"] == "encoder profile"]
        return dict(part)

    got = encoder(full)
    assert got["bytes"] > 0 and got["inputs"]["modality"] == "video"
    assert got["inputs"]["tokens_per_item"] == 32768
    assert encoder(bare)["bytes"] is None
    assert any("max_pixels is not known" in n for n in bare["memory_estimate"]["notes"])
