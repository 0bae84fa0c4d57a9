"""Markdown built from typed parts, so no name, premise, model output or CSV text reaches a page as markup.

A :class:`Markdown` is a sequence of parts, each rendered by its type when the page asks for its source:

- :func:`text` (any ``str`` given where a part is expected is text): every ASCII punctuation mark is
  backslash-escaped, which CommonMark and MyST read as that mark, so no tag, entity, link, role, emphasis,
  math, substitution, list, heading or table cell can start inside it; line breaks become spaces;
- :func:`code`: an inline code span fenced by a backtick run longer than any run inside it;
- :func:`number`: a number formatted by a format spec (``n/a`` when missing), then shown as text;
- :func:`strong` and :func:`emphasis`: markup around parts that are themselves rendered by type;
- :func:`paragraphs`, :func:`bullets`, :func:`quote` and :func:`table`: blocks of parts.

There is no part that passes a string through as source: a caller can only choose among these types.
``str()`` of a :class:`Markdown` is its plain reading (what ``{glue:text}`` pastes); :meth:`Markdown.source`
is the Markdown a page parses (what ``{glue:md}`` and a notebook's ``display`` paste).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Union

Part = Union["Markdown", str, int, float]

_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation mark, each escapable in CommonMark
_BREAKS = re.compile(r"[\r\n\t\v\f\u2028\u2029]+")


@dataclass(frozen=True)
class _Text:
    value: str

    def source(self) -> str:
        return _PUNCTUATION.sub(r"\\\1", _BREAKS.sub(" ", self.value))

    def plain(self) -> str:
        return self.value


@dataclass(frozen=True)
class _Code:
    value: str

    def source(self) -> str:
        value = _BREAKS.sub(" ", self.value)
        if not value:
            return ""  # CommonMark has no empty code span: two backticks would show as such
        fence = "`" * (max(map(len, re.findall("`+", value)), default=0) + 1)
        # CommonMark strips one space from each side of a span, so a value that begins or ends with a backtick
        # (or a space) is padded and kept whole.
        pad = " " if value[:1] in ("`", " ") or value[-1:] in ("`", " ") else ""
        return f"{fence}{pad}{value}{pad}{fence}"

    def plain(self) -> str:
        return self.value

    def cell_source(self) -> str:
        # In a pipe table a "|" ends the cell even inside a code span; "\|" there reads as "|".
        return self.source().replace("|", "\\|")


@dataclass(frozen=True)
class _Wrapped:
    mark: str  # "**" or "*"
    inner: "Markdown"

    def source(self) -> str:
        return f"{self.mark}{self.inner.source()}{self.mark}" if self.inner else ""

    def cell_source(self) -> str:
        return f"{self.mark}{self.inner.cell_source()}{self.mark}" if self.inner else ""

    def plain(self) -> str:
        return self.inner.plain()


@dataclass(frozen=True)
class _Block:
    separator: str  # between the source of two items
    prefix: str  # before each item's source
    items: tuple["Markdown", ...]

    def source(self) -> str:
        return self.separator.join(self.prefix + item.source().strip() for item in self.items)

    def plain(self) -> str:
        return "\n".join(item.plain() for item in self.items)


@dataclass(frozen=True)
class _Quote:
    inner: "Markdown"

    def source(self) -> str:
        # Every line of the inner blocks behind "> ": no text part holds a line break, so none can leave it.
        return "\n".join(f"> {line}".rstrip() for line in self.inner.source().split("\n"))

    def plain(self) -> str:
        return self.inner.plain()


@dataclass(frozen=True)
class _Table:
    header: tuple["Markdown", ...]
    rows: tuple[tuple["Markdown", ...], ...]

    def source(self) -> str:
        def line(cells: Sequence[Markdown]) -> str:
            return "| " + " | ".join(c.cell_source() for c in cells) + " |"

        return "\n".join([line(self.header), "|" + "---|" * len(self.header), *map(line, self.rows)])

    def plain(self) -> str:
        return "\n".join("\t".join(c.plain() for c in cells) for cells in (self.header, *self.rows))


class Markdown:
    """Markdown made of parts, each rendered by its type (a ``str`` or a number given is text or a number;
    another :class:`Markdown` keeps its own parts). Joined with ``+`` and :meth:`join`; shown by IPython's
    ``display`` and pasted by myst-nb's glue as the source it renders."""

    __slots__ = ("_parts",)

    def __init__(self, *parts: Part) -> None:
        nodes: list = []
        for part in parts:
            if isinstance(part, Markdown):
                nodes.extend(part._parts)
            elif isinstance(part, (int, float)) and not isinstance(part, bool):
                nodes.extend(number(part)._parts)
            else:
                nodes.append(_Text(str(part)))
        self._parts = tuple(nodes)

    @classmethod
    def _of(cls, node) -> "Markdown":
        made = cls()
        made._parts = (node,)
        return made

    def source(self) -> str:
        """The Markdown a page parses: every part escaped by its type."""
        return "".join(node.source() for node in self._parts)

    def cell_source(self) -> str:
        """:meth:`source` for a cell of a pipe table (where a code span's ``|`` must be escaped too)."""
        return "".join(getattr(node, "cell_source", node.source)() for node in self._parts)

    def plain(self) -> str:
        """The text a reader sees, without markup (for plain-text pastes)."""
        return "".join(node.plain() for node in self._parts)

    def join(self, parts: Iterable[Part]) -> "Markdown":
        """The parts with this Markdown between each two (as ``str.join``)."""
        joined: list[Part] = []
        for i, part in enumerate(parts):
            joined += [self, part] if i else [part]
        return Markdown(*joined)

    def __add__(self, other: Part) -> "Markdown":
        return Markdown(self, other)

    def __radd__(self, other: Part) -> "Markdown":
        return Markdown(other, self)

    def __bool__(self) -> bool:
        return bool(self.plain())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Markdown) and self.source() == other.source()

    def __hash__(self) -> int:
        return hash(self.source())

    def __str__(self) -> str:
        return self.plain()

    def __repr__(self) -> str:
        # IPython's text/plain: quoted as a str is, which myst-nb's {glue:text} unquotes to the plain text.
        return repr(self.plain())

    def _repr_markdown_(self) -> str:
        # Stripped: a displayed output is a block, where four leading spaces would make it a code block.
        return self.source().strip()


def text(value: object) -> Markdown:
    """``value`` (as ``str``) shown literally."""
    return Markdown._of(_Text(str(value)))


def code(value: object) -> Markdown:
    """``value`` (as ``str``) as inline code that it cannot close."""
    return Markdown._of(_Code(str(value)))


def number(value: float | int | None, spec: str = "") -> Markdown:
    """``value`` formatted by ``spec`` (``format(value, spec)``), ``n/a`` when missing, shown as text."""
    missing = value is None or (isinstance(value, float) and math.isnan(value))
    return text("n/a" if missing else format(value, spec))


def strong(*parts: Part) -> Markdown:
    """The parts in bold."""
    return Markdown._of(_Wrapped("**", Markdown(*parts)))


def emphasis(*parts: Part) -> Markdown:
    """The parts in italics."""
    return Markdown._of(_Wrapped("*", Markdown(*parts)))


def paragraphs(*blocks: Part) -> Markdown:
    """Each block its own paragraph (empty ones left out)."""
    return Markdown._of(_Block("\n\n", "", tuple(b for b in map(Markdown, blocks) if b)))


def bullets(items: Iterable[Part]) -> Markdown:
    """A bulleted list, one item per part."""
    return Markdown._of(_Block("\n", "- ", tuple(map(Markdown, items))))


def quote(*blocks: Part) -> Markdown:
    """The blocks (as :func:`paragraphs`) set off as a block quote: a box the page shows apart."""
    return Markdown._of(_Quote(paragraphs(*blocks)))


def table(header: Sequence[Part], rows: Iterable[Sequence[Part]]) -> Markdown:
    """A pipe table (MyST/CommonMark), a block of its own; every cell is text, a number or parts."""
    header = tuple(map(Markdown, header))
    body = tuple(tuple(map(Markdown, row)) for row in rows)
    if any(len(row) != len(header) for row in body):
        raise ValueError("every row of a table needs one cell per column")
    return Markdown._of(_Table(header, body))
