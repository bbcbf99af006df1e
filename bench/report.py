"""Figures as titled tables: aligned text for people, JSON for programs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: Any) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{self.title}: {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(list(cells))

    def render(self) -> str:
        texts = [self.columns, *([_text(cell) for cell in row] for row in self.rows)]
        widths = [max(len(row[i]) for row in texts) for i in range(len(self.columns))]
        # Text reads best left-aligned, numbers right-aligned so digits line up.
        numeric = [all(isinstance(row[i], (int, float)) for row in self.rows) for i in range(len(self.columns))]

        def line(cells: list[str]) -> str:
            padded = (c.rjust(w) if right else c.ljust(w) for c, w, right in zip(cells, widths, numeric, strict=True))
            return "  ".join(padded).rstrip()

        out = [self.title, "=" * len(self.title), line(self.columns), line(["-" * w for w in widths])]
        out += [line(row) for row in texts[1:]]
        out += [f"  * {note}" for note in self.notes]
        return "\n".join(out)

    def as_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "rows": [
                {column: _json(cell) for column, cell in zip(self.columns, row, strict=True)} for row in self.rows
            ],
            "notes": self.notes,
        }


def _json(cell: Any) -> Any:
    """Cells with structure (such as call counts) say how they serialise."""
    if hasattr(cell, "as_json"):
        return cell.as_json()
    if isinstance(cell, float):
        # A percentile of no samples is NaN, which JSON cannot spell.
        return None if math.isnan(cell) else round(cell, 3)
    return cell


def _text(cell: Any) -> str:
    if isinstance(cell, float):
        return f"{cell:,.1f}"
    return str(cell)
