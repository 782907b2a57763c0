"""When a failed model call is tried again, and after how long.

A call is retried only while nothing has been streamed to the caller (no content
block started), only for failures that may pass (HTTP 408/409/429, 5xx incl. 529
"overloaded", an overload/server error event before any content, connection
failures and timeouts) and at most `max_retries` times. The wait honours the
server's `retry-after-ms` / `retry-after` (seconds or HTTP date); without one it is
exponential from `retry_base_delay` with jitter, capped at `retry_max_delay`. A
server that asks for a longer wait than `retry_max_wait` is not waited for: the
call fails with the provider's message.

Options (in `ModelSpec.options`): `max_retries` (3), `retry_base_delay` (1.0 s),
`retry_max_delay` (30 s), `retry_max_wait` (60 s).
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass

RETRYABLE_STATUS = frozenset({408, 409, 429})


@dataclass(frozen=True)
class Failure:
    """A provider failure, described: the message for `errorMessage`, retry facts."""

    message: str
    retryable: bool = False
    retry_after: float | None = None


class ProviderError(Exception):
    """A failure found while reading a response (bad end of stream, error stop reason)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def _number(options: dict, key: str, default: float, *, minimum: float = 0) -> float:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise ValueError(f"option {key!r} must be a number >= {minimum}, got {value!r}")
    return value


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    base_delay: float = 1.0
    max_delay: float = 30.0
    max_wait: float = 60.0

    @classmethod
    def from_options(cls, options: dict) -> RetryPolicy:
        return cls(
            max_retries=int(_number(options, "max_retries", 3)),
            base_delay=float(_number(options, "retry_base_delay", 1.0)),
            max_delay=float(_number(options, "retry_max_delay", 30.0)),
            max_wait=float(_number(options, "retry_max_wait", 60.0)),
        )

    def delay(self, attempt: int, retry_after: float | None) -> float | None:
        """Seconds to wait before retry number `attempt + 1`, or None when not worth it."""
        if retry_after is not None and retry_after > 0:
            return None if retry_after > self.max_wait else retry_after
        backoff = min(self.base_delay * (2 ** min(attempt, 30)), self.max_delay)
        return backoff * (1 - 0.25 * random.random())


def status_is_retryable(status: int | None) -> bool:
    return status is not None and (status in RETRYABLE_STATUS or status >= 500)


def parse_retry_after(headers) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (number or HTTP date); None if absent."""
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - time.time())
