"""Compiled regex constraints of one model, kept so that each regex is compiled once: the most recently used
in memory (each as an :class:`~.jump_forward.IndexWalker`), every one on disk, keyed by the model file's
sha256 and the regex.

:func:`compile_index` builds outlines-core's index over only the tokens made of bytes the regex can match: the
same index, 9 to 14 times sooner on the default model's turn-1 regexes (6 variables: 2.1 s instead of 19.4 s;
``benchmarks/regex_indexes.py``).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

from .jump_forward import IndexWalker

try:  # Python's own regex parser (3.11 and later), which reads the regex's syntax tree
    from re import _constants as _sre, _parser
except ImportError:  # another Python: regexes are compiled over the whole vocabulary
    _sre = _parser = None


def token_texts(tokenizer: Any) -> tuple[int, dict[str, list[int]]]:
    """The end-of-sequence id and the token texts of an outlines tokenizer, each with its ids, formed as
    outlines' ``OutlinesCoreBackend`` forms its vocabulary (the end-of-sequence text left out)."""
    texts: dict[str, list[int]] = {}
    for token, token_id in tokenizer.vocabulary.items():
        texts.setdefault(tokenizer.convert_token_to_string(token), []).append(token_id)
    texts.pop(tokenizer.convert_token_to_string(tokenizer.eos_token), None)
    return tokenizer.eos_token_id, texts


def _read_apart(regex: str) -> bool:
    """Whether ``regex`` holds syntax that Rust's regex crate (outlines-core's) and Python's parser read
    apart: a class inside a class (nested, or POSIX ``[:alpha:]``), class set operations (``&&``, ``--``,
    ``~~``), or a group other than ``(?:`` (flags, names)."""
    i, in_class = 0, False
    while i < len(regex):
        if regex[i] == "\\":
            i += 2
            continue
        if in_class:
            if regex[i] == "[" or regex.startswith(("&&", "--", "~~"), i):
                return True
            in_class = regex[i] != "]"
        elif regex[i] == "[":
            in_class = True
            i += 1 + regex.startswith("^", i + 1)
            i += regex.startswith("]", i)  # a leading ] is a member
            continue
        elif regex.startswith("(?", i) and not regex.startswith("(?:", i):
            return True
        i += 1
    return False


def _member_bytes(member: Any, value: Any) -> bytes | range | None:
    """The bytes a class member can match, or None (a negation, a category, a range beyond ASCII)."""
    if member is _sre.LITERAL:
        return chr(value).encode()
    if member is _sre.RANGE and value[1] < 0x80:
        return range(value[0], value[1] + 1)
    return None


def _parts(op: Any, arg: Any) -> list[Any] | None:
    """The sub-patterns of a node that only groups, repeats or branches them, or None for any other node."""
    if op is _sre.SUBPATTERN:
        return None if arg[1] or arg[2] else [arg[3]]  # inline flags (case folding) change what matches
    if op is _sre.BRANCH:
        return list(arg[1])
    if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT):
        return [arg[2]]
    return None  # NOT_LITERAL, ANY, back references, lookarounds


def _read_bytes(pattern: Any, alphabet: set[int]) -> bool:
    """Add to ``alphabet`` every byte ``pattern`` (a parsed regex) can match; False where it cannot tell."""
    for op, arg in pattern:
        if op is _sre.AT:
            continue
        if op is _sre.LITERAL:
            alphabet.update(chr(arg).encode())
        elif op is _sre.IN:
            members = [_member_bytes(member, value) for member, value in arg]
            if any(m is None for m in members):
                return False
            alphabet.update(b for m in members for b in m)
        else:
            parts = _parts(op, arg)
            if parts is None or not all(_read_bytes(part, alphabet) for part in parts):
                return False
    return True


def regex_alphabet(regex: str) -> set[int] | None:
    """Every byte of every text ``regex`` matches, read off its syntax (a superset: each literal character
    and class member that can occur), or None when the regex holds what this reading cannot bound (a negated
    class, ``.``, ``\\d``-like categories, non-ASCII ranges, flags, syntax Python and Rust read apart)."""
    if _sre is None or _read_apart(regex):
        return None
    try:
        pattern = _parser.parse(regex)
    except Exception:  # noqa: BLE001 - syntax only Rust reads: no filter
        return None
    alphabet: set[int] = set()
    return alphabet if _read_bytes(pattern, alphabet) else None


def compile_index(regex: str, eos_id: int, texts: dict[str, list[int]]) -> Any:
    """outlines-core's index of ``regex`` over the tokens ``texts``, built over only those made of bytes in
    :func:`regex_alphabet`. A token with any other byte leaves every live state of the regex's automaton for
    the dead one (no text of the regex holds that byte), and outlines-core gives no transition into the dead
    state: so the index keeps its initial state, every transition and every final state (tests compare
    them). Only its ``vocab_size`` (its tokens counted) is smaller, which nothing reads: the masks are sized
    by the model's logits."""
    from outlines_core import Index, Vocabulary

    alphabet = regex_alphabet(regex)
    if alphabet is not None:
        texts = {text: ids for text, ids in texts.items() if alphabet.issuperset(text.encode())}
    return Index(regex, Vocabulary(eos_id, texts))


class RegexIndexes:
    """Indexes of the model whose file hashes to ``model_sha256``, at most ``capacity`` in memory, kept in
    ``directory``; ``compile`` makes one for a regex seen nowhere yet."""

    def __init__(self, directory: Path, model_sha256: str, eos_id: int, *, capacity: int,
                 compile: Callable[[str], Any]):
        self.directory, self.model_sha256, self.eos_id = directory, model_sha256, eos_id
        self.capacity, self.compile = capacity, compile
        self._walkers: OrderedDict[str, IndexWalker] = OrderedDict()

    def walker(self, regex: str) -> tuple[IndexWalker, float]:
        """The compiled index for ``regex`` (memory, then disk, else compiled now) and the compile seconds."""
        walker = self._walkers.get(regex)
        if walker is not None:
            self._walkers.move_to_end(regex)
            return walker, 0.0
        compile_s = 0.0
        index = self._load(regex)
        if index is None:
            start = time.perf_counter()
            index = self.compile(regex)
            compile_s = time.perf_counter() - start
            self._save(regex, index)
        walker = IndexWalker(index, self.eos_id)
        self._walkers[regex] = walker
        while len(self._walkers) > self.capacity:
            self._walkers.popitem(last=False)
        return walker, compile_s

    def _path(self, regex: str) -> Path:
        key = hashlib.sha256(f"{self.model_sha256}\n{regex}".encode()).hexdigest()
        return self.directory / f"{key}.pkl"

    def _load(self, regex: str) -> Any | None:
        """An index saved by an earlier process, or None."""
        path = self._path(regex)
        if not path.is_file():
            return None
        try:
            return pickle.loads(path.read_bytes())
        except Exception:  # noqa: BLE001 - a damaged file is recompiled and overwritten
            return None

    def _save(self, regex: str, index: Any) -> None:
        path = self._path(regex)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_bytes(pickle.dumps(index))
        temporary.replace(path)
