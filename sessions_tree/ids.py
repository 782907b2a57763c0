"""Session ids, entry ids and timestamps as Pi makes them (pi-session-format.md §3).

- session id: UUIDv7 string (36 chars), time-ordered;
- entry id: the first 8 lowercase hex chars of a random v4 UUID, retried while it
  collides with an id already in the session, a full UUID after 100 collisions;
- entry/header ``timestamp``: ``Date.toISOString()`` (UTC, milliseconds, ``Z``);
- message ``timestamp``: Unix epoch milliseconds.

:func:`iso_to_ms` is ``Date.parse`` for the ISO forms (what Pi's ``new Date(ts)``
gives for the timestamps it writes, and for the variants V8 also accepts).
"""

from __future__ import annotations

import calendar
import os
import re
import secrets
import threading
import time
import uuid
from collections.abc import Container

__all__ = [
    "iso_to_ms",
    "ms_to_iso",
    "new_entry_id",
    "new_session_id",
    "now_iso",
    "now_ms",
]

_MAX_TIME = 8.64e15  # ECMAScript TimeClip bound

_uuid7_lock = threading.Lock()
_uuid7_last = (0, 0)  # (ms, 12-bit counter) of the last id made in this process


def new_session_id() -> str:
    """A UUIDv7 (RFC 9562): 48-bit Unix ms, version 7, 12-bit counter, variant, 62 random bits.

    Ids made by one process are strictly increasing (the counter in ``rand_a``
    orders ids made in the same millisecond), like the ``uuid`` package Pi uses.
    """
    global _uuid7_last
    with _uuid7_lock:
        ms = time.time_ns() // 1_000_000
        last_ms, last_seq = _uuid7_last
        if ms > last_ms:
            seq = secrets.randbits(11)  # room to count up within the millisecond
        else:
            ms, seq = last_ms, last_seq + 1
            if seq > 0xFFF:
                ms, seq = last_ms + 1, 0
        _uuid7_last = (ms, seq)
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | seq << 64 | 0b10 << 62 | rand_b
    return str(uuid.UUID(int=value))


def new_entry_id(taken: Container[str]) -> str:
    """8 lowercase hex chars not in ``taken``; a full UUID after 100 collisions (Pi's rule)."""
    for _ in range(100):
        candidate = secrets.token_hex(4)
        if candidate not in taken:
            return candidate
    return str(uuid.uuid4())


def now_ms() -> int:
    """Current Unix time in milliseconds (``Date.now()``)."""
    return time.time_ns() // 1_000_000


def ms_to_iso(ms: int) -> str:
    """``new Date(ms).toISOString()`` for years 0000-9999."""
    seconds, millis = divmod(int(ms), 1000)
    t = time.gmtime(seconds)
    if not 0 <= t.tm_year <= 9999:
        raise ValueError(f"{ms} ms is outside the years 0000-9999")
    return f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}.{millis:03d}Z"


def now_iso() -> str:
    """Current time as ``Date.toISOString()`` gives it: ``2025-06-02T09:14:05.120Z``."""
    return ms_to_iso(now_ms())


# Date-time string format of ECMAScript (§21.4.1.32) with V8's tolerances: lower-case
# "t"/"z", a space instead of "T", any number of fraction digits, "+hhmm" offsets.
_ISO = re.compile(
    r"(?P<year>[+-]\d{6}|\d{4})"
    r"(?:-(?P<month>\d{2})(?:-(?P<day>\d{2}))?)?"
    r"(?:[Tt ](?P<hour>\d{2}):(?P<minute>\d{2})"
    r"(?::(?P<second>\d{2})(?:\.(?P<fraction>\d+))?)?"
    r"(?P<zone>[Zz]|[+-]\d{2}:?\d{2})?)?",
    re.ASCII,
)


def _days_before_year(year: int) -> int:
    """Days from 1970-01-01 to January 1st of ``year`` (proleptic Gregorian)."""
    y = year - 1
    return 365 * (year - 1970) + (y // 4 - y // 100 + y // 400) - (1969 // 4 - 1969 // 100 + 1969 // 400)


def _month_offset(year: int, month: int) -> int:
    """Days from January 1st to the first of ``month`` in ``year``."""
    days = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)[month - 1]
    if month > 2 and calendar.isleap(year):
        days += 1
    return days


def iso_to_ms(ts) -> int | None:
    """``Date.parse(ts)`` for ISO date/time strings; None where JavaScript gives NaN.

    Accepts ``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD`` (UTC), optionally followed by
    ``THH:mm[:ss[.sss…]]`` and ``Z`` or ``±HH:mm``; a date-time without an offset is
    local time, as in JavaScript. Like V8, a day up to 31 rolls over into the next
    month (``2025-02-30`` is March 2nd) and ``24:00`` is the end of the day.
    V8's fallback parser for non-ISO text (``"Jun 2 2025"``) is not reproduced:
    such strings give None.
    """
    if not isinstance(ts, str):
        return None
    m = _ISO.fullmatch(ts)
    if m is None:
        return None
    year_text = m["year"]
    if year_text == "-000000":
        return None
    year = int(year_text)
    month = int(m["month"] or 1)
    day = int(m["day"] or 1)
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    has_time = m["hour"] is not None
    hour = int(m["hour"] or 0)
    minute = int(m["minute"] or 0)
    second = int(m["second"] or 0)
    millis = int((m["fraction"] or "0")[:3].ljust(3, "0"))
    if minute > 59 or second > 59 or hour > 24:
        return None
    if hour == 24 and (minute or second or millis):
        return None
    days = _days_before_year(year) + _month_offset(year, month) + day - 1
    total = ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis
    zone = m["zone"]
    if zone and zone not in ("Z", "z"):
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        off_h, off_m = int(digits[:2]), int(digits[2:])
        if off_h > 23 or off_m > 59:
            return None
        total -= sign * (off_h * 60 + off_m) * 60_000
    elif has_time and not zone:
        total = _local_to_utc(total)
        if total is None:
            return None
    if abs(total) > _MAX_TIME:
        return None
    return total


def _local_to_utc(local_ms: int) -> int | None:
    """UTC ms for a wall-clock time in the local zone (as JavaScript's LocalTime inverse)."""
    seconds, millis = divmod(local_ms, 1000)
    try:
        t = time.gmtime(seconds)
        utc = time.mktime((t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, 0, 0, -1))
    except (OverflowError, ValueError, OSError):
        return None
    return int(utc) * 1000 + millis
