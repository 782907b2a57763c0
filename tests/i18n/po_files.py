"""A small reader of gettext .po files (what the catalog tests need: ids, plurals,
translations, flags)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class PoEntry:
    msgid: str = ""
    plural: str | None = None
    context: str | None = None
    strs: dict[int, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)
    obsolete: bool = False

    @property
    def key(self) -> str:
        """The key gettext's compiled catalogs use (context, EOT, id)."""
        return f"{self.context}\x04{self.msgid}" if self.context is not None else self.msgid


def read_po(path: Path) -> list[PoEntry]:
    entries: list[PoEntry] = []
    entry, last = None, None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line:
            if entry is not None:
                entries.append(entry)
            entry = None
            continue
        if entry is None:
            entry = PoEntry()
        if line.startswith("#~"):
            entry.obsolete = True
        elif line.startswith("#,"):
            entry.flags |= {flag.strip() for flag in line[2:].split(",")}
        elif line.startswith("#"):
            continue
        elif line.startswith("msgctxt "):
            entry.context, last = json.loads(line[8:]), ("context", None)
        elif line.startswith("msgid_plural "):
            entry.plural, last = json.loads(line[13:]), ("plural", None)
        elif line.startswith("msgid "):
            entry.msgid, last = json.loads(line[6:]), ("msgid", None)
        elif line.startswith("msgstr["):
            n = int(line[7 : line.index("]")])
            entry.strs[n], last = json.loads(line[line.index("]") + 2 :]), ("strs", n)
        elif line.startswith("msgstr "):
            entry.strs[0], last = json.loads(line[7:]), ("strs", 0)
        elif line.startswith('"'):
            more = json.loads(line)
            if last[0] == "strs":
                entry.strs[last[1]] += more
            else:
                setattr(entry, last[0], (getattr(entry, last[0]) or "") + more)
    if entry is not None:
        entries.append(entry)
    return entries
