"""Rich display in notebooks: a titled table as HTML or Markdown, for ``_repr_html_``/``_repr_markdown_``.

A table is a title and rows of cells; a cell is plain text, escaped here, or ``Code(text)``, shown
preformatted (a program).  ``Certificate`` and ``Kernel`` describe themselves as tables and leave the
markup to this module.
"""
from __future__ import annotations

import html
from dataclasses import dataclass

__all__ = ["Code", "html_table", "markdown_table"]


@dataclass(frozen=True)
class Code:
    """A cell shown as preformatted code (a program, a type)."""

    text: str


def _html_cell(cell) -> str:
    if isinstance(cell, Code):
        return f"<pre style=\"margin: 0; text-align: left\">{html.escape(cell.text)}</pre>"
    return html.escape(str(cell))


def html_table(title: str, header: tuple, rows: list[tuple]) -> str:
    head = "".join(f"<th style=\"text-align: left\">{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td style=\"text-align: left\">{_html_cell(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return (f"<table><caption style=\"text-align: left\"><b>{html.escape(title)}</b></caption>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def _md_cell(cell) -> str:
    if isinstance(cell, Code):
        lines = cell.text.splitlines() or [""]
        return "<br>".join(f"`{line}`".replace("|", "\\|") for line in lines if line) or "` `"
    return _md_text(str(cell))


def _md_text(text: str) -> str:
    """Text in Markdown: ``|`` would end a cell and ``$`` start math in a notebook."""
    return text.replace("|", "\\|").replace("$", "\\$")


def markdown_table(title: str, header: tuple, rows: list[tuple]) -> str:
    lines = [f"**{_md_text(title)}**", "", "| " + " | ".join(header) + " |",
             "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
