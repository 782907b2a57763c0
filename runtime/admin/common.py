"""What the console's runtime pages share: fieldsets by group, a JSON viewer, the error preview length."""

from __future__ import annotations

import json

from django.utils.html import format_html

ERROR_SHOWN = 300  # characters of a run's error a list row reads (the column may be long)


def _pretty(value) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))


def grouped(fields, groups, rest: str = "Other settings") -> list:
    """Fieldsets for a page: ``groups`` is ``(title, names[, classes])``; a field a group does not
    name (one added later) still shows, in a ``rest`` group at the end."""
    present = list(dict.fromkeys(fields))
    placed: set[str] = set()
    out = []
    for title, names, *classes in groups:
        mine = [name for name in names if name in present]
        placed.update(mine)
        if mine:
            out.append((title, {"fields": mine, "classes": classes[0] if classes else ()}))
    leftover = [name for name in present if name not in placed and name != "id"]
    if leftover:
        out.append((rest, {"fields": leftover}))
    return out
