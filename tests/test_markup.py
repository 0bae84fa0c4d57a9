"""Markdown from typed parts: each part rendered by its type, so no text a caller gives becomes markup.

The rendered HTML is checked with markdown-it, the parser MyST (and so the book) uses.
"""

from __future__ import annotations

import ast
import re

import nbformat
import pytest
from markdown_it import MarkdownIt

from cpdagthink.analysis.markup import Markdown, bullets, code, emphasis, number, paragraphs, quote, strong, table
from cpdagthink.paths import PROJECT_ROOT

HOSTILE = ['<img src=x onerror="window.pwned=1">', "<script>alert(1)</script>", "[a](javascript:alert(1))",
           "*x* _y_ **z** ~~s~~", "{glue:md}`x` {{ sub }} $x^2$ \\(a\\)", "`` ` ``` code", "&amp; &lt;b&gt; &#60;",
           "a | b", "# heading", "- item", "1. item", "> quote", ":::{note}\nx\n:::", "% comment", "+++", "\\", "",
           "  \n\t\u2028line"]


def render(markdown: Markdown) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown.source())


def visible(html: str) -> str:
    """The text of rendered HTML (entities undone), as a reader sees it."""
    import html as html_module

    return html_module.unescape(re.sub(r"<[^>]+>", "", html))


@pytest.mark.parametrize("value", HOSTILE)
def test_text_renders_as_exactly_its_characters(value):
    html = render(Markdown("Before ", value, " after"))
    assert re.sub(r"<[^>]+>", "", html) == html.replace("<p>", "").replace("</p>", "")  # no tag but the paragraph
    expected = re.sub(r"[\r\n\t\v\f\u2028\u2029]+", " ", f"Before {value} after")
    assert visible(html).strip() == expected.strip()


@pytest.mark.parametrize("value", HOSTILE)
def test_code_is_one_span_that_its_value_cannot_close(value):
    html = render(Markdown("run ", code(value), "."))
    if not value:
        assert html == "<p>run .</p>\n"
        return
    assert html.count("<code>") == 1 and "<" not in re.sub(r"</?(p|code)>", "", html)
    shown = visible(re.search(r"<code>(.*)</code>", html, re.S).group(1))
    assert shown == re.sub(r"[\r\n\t\v\f\u2028\u2029]+", " ", value)


def test_strong_emphasis_numbers_and_plain_text():
    phrase = Markdown(strong(18), " rows of the ", code("test"), " split; ", emphasis("<b>"), " ", number(0.1234, ".2f"),
                      ", ", number(float("nan"), ".1f"))
    assert render(phrase) == "<p><strong>18</strong> rows of the <code>test</code> split; <em>&lt;b&gt;</em> 0.12, n/a</p>\n"
    assert str(phrase) == "18 rows of the test split; <b> 0.12, n/a"
    assert repr(phrase) == repr(str(phrase))  # IPython's text/plain, which {glue:text} reads with literal_eval
    assert phrase._repr_markdown_() == phrase.source()
    indented = MarkdownIt("commonmark").render(Markdown("    <b>x</b>")._repr_markdown_())  # displayed: a block
    assert indented == "<p>&lt;b&gt;x&lt;/b&gt;</p>\n"


def test_a_raw_string_or_an_f_string_is_always_text():
    name = "<script>x</script>"
    assert "<script>" not in render(Markdown(f"On `{name}` **bold**"))
    assert render(Markdown(f"On `{name}` **bold**")) == "<p>On `&lt;script&gt;x&lt;/script&gt;` **bold**</p>\n"
    assert (Markdown("a") + "<b>" + code("c")).source() == "a\\<b\\>`c`"
    assert ("<b>" + Markdown("a")).source() == "\\<b\\>a"
    assert Markdown(", ").join(["<i>", code("x")]).source() == "\\<i\\>\\, `x`"


def test_blocks_paragraphs_bullets_and_tables():
    page = paragraphs(Markdown(strong("Head:"), " <b>"), "", bullets(["one <i>", Markdown("two ", code("a|b"))]),
                      table(["model", "n"], [["<script>x</script> a|b", 3], [Markdown(code("x|y")), number(None)]]))
    html = render(page)
    assert html.count("<p>") == 1 and html.count("<li>") == 2 and html.count("<tr>") == 3
    assert "<script>" not in html and "&lt;script&gt;x&lt;/script&gt; a|b" in html
    assert "<td><code>x|y</code></td>" in html and "<td>n/a</td>" in html
    assert "<code>a|b</code>" in html  # a code span outside a table keeps its pipe as it is
    with pytest.raises(ValueError, match="one cell per column"):
        table(["a", "b"], [["only one"]])


@pytest.mark.parametrize("value", HOSTILE)
def test_a_quote_holds_its_blocks_and_no_text_leaves_it(value):
    html = render(paragraphs(quote(Markdown(strong("Box:"), " ", value), bullets([value, "two"])), "after"))
    assert html.startswith("<blockquote>\n<p><strong>Box:</strong>") and html.count("<blockquote>") == 1
    assert html.index("</blockquote>") > html.index("<li>two</li>") and html.endswith("<p>after</p>\n")
    assert visible(html).count(" ".join(value.split()) if value.strip() else "Box:")


def test_no_page_builds_markdown_or_html_but_through_the_markup_module():
    """IPython's ``Markdown`` takes a string as source; the chapters and the book's modules never use it, so every
    Markdown they display is built from typed parts."""
    sources = {path: path.read_text() for path in (PROJECT_ROOT / "lib" / "cpdagthink").rglob("*.py")}
    for path in sorted((PROJECT_ROOT / "notebooks").glob("*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        sources[path] = "\n".join(c.source for c in cells if c.cell_type == "code")
    for path, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("IPython"):
                assert "Markdown" not in {a.name for a in node.names}, path
    assert "Markdown" in sources[PROJECT_ROOT / "notebooks" / "04_probes.ipynb"]
