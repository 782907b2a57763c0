"""Blank means blank: text made only of characters that show nothing is no text.

``str.strip`` and ``str.split`` know whitespace, not the characters that are invisible
without being whitespace: zero-width spaces and joiners, the byte-order mark, word joiners,
soft hyphens, bidirectional marks, other format and control characters, and the filler
letters some scripts have (Hangul fillers, the blank Braille pattern). A todo item, a
question, a search query or a prompt of those alone is refused as blank.
"""

from __future__ import annotations

import unicodedata

#: Letters and symbols that render as nothing (not whitespace, not format characters).
_FILLERS = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180e\u2800\u3164\uffa0")


def _invisible(char: str) -> bool:
    return char.isspace() or char in _FILLERS or unicodedata.category(char) in ("Cf", "Cc", "Zs", "Zl", "Zp")


def is_blank(text: str) -> bool:
    """True when ``text`` has no character that shows."""
    return all(_invisible(char) for char in text)
