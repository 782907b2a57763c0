"""Collecting a command's output: a bounded tail in memory, the full output on disk.

Output is counted as it streams (bytes, lines). Only the last
``2 × max_bytes`` bytes stay in memory. Once the output outgrows the truncation
limits it is also written, from the first byte, to a file in the output
directory (capped at ``max_saved_bytes``; files older than a week are pruned
when a new one is written), and the final text names that file, as Pi does. Text is decoded as UTF-8 with replacement (invalid bytes and
encoded surrogates become U+FFFD), ANSI escape sequences are removed, and CR/LF
line ends become LF.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
import uuid
from pathlib import Path

from infra.lazy_settings import settings  # no Django at a subagent child's start-up
from toolcatalog.truncation import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Truncation, truncate_tail

MAX_SAVED_BYTES = 64 * 1024 * 1024

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_terminal_text(text: str) -> str:
    text = _ANSI.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", text)


KEEP_SECONDS = 7 * 24 * 3600


def default_output_dir() -> Path:
    """``settings.NETA_TOOL_OUTPUT_DIR`` when set, else ``$TMPDIR/neta-tool-output``."""
    try:
        configured = getattr(settings, "NETA_TOOL_OUTPUT_DIR", None) if settings.configured else None
    except ImportError:
        configured = None
    return Path(configured) if configured else Path(tempfile.gettempdir()) / "neta-tool-output"


def prune_old_outputs(directory: Path, *, keep_seconds: float = KEEP_SECONDS) -> int:
    """Delete saved outputs older than a week; returns how many went."""
    cutoff = time.time() - keep_seconds
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.name.endswith(".log") and entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    return removed


class CommandOutput:
    def __init__(
        self,
        *,
        output_dir: Path | None = None,
        prefix: str = "bash",
        max_lines: int = DEFAULT_MAX_LINES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_saved_bytes: int = MAX_SAVED_BYTES,
    ) -> None:
        self.output_dir = output_dir or default_output_dir()
        self.prefix = prefix
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.max_saved_bytes = max_saved_bytes
        self.keep = max_bytes * 2
        self.total_bytes = 0
        self.newlines = 0
        self.tail = bytearray()
        self.head_dropped = False
        self.saved_path: Path | None = None
        self.saved_bytes = 0
        self.saved_capped = False
        self._file = None
        self._first = bytearray()  # the beginning, until a file is opened

    # --- streaming -------------------------------------------------------------------

    def append(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        self.newlines += chunk.count(b"\n")
        self.tail += chunk
        if len(self.tail) > self.keep:
            del self.tail[: len(self.tail) - self.keep]
            self.head_dropped = True
        if self._file is None and self.saved_path is None:
            if len(self._first) < self.keep + 1:
                self._first += chunk
            if self._needs_file():
                self._open_file()
        elif self._file is not None:
            self._save(chunk)

    def _needs_file(self) -> bool:
        return self.total_bytes > self.max_bytes or self.newlines + 1 > self.max_lines

    def _open_file(self) -> None:
        try:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            prune_old_outputs(self.output_dir)
            path = self.output_dir / f"{self.prefix}-{uuid.uuid4().hex}.log"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            self._file = os.fdopen(fd, "wb")
            self.saved_path = path
        except OSError:
            self._file = None
            return
        # _first holds everything so far: it keeps 2 × max_bytes and a chunk is
        # at most 64 KB, so the limits are crossed before it fills up.
        self._save(bytes(self._first))
        if len(self._first) < self.total_bytes:
            self.saved_capped = True
        self._first = bytearray()

    def _save(self, data: bytes) -> None:
        if self._file is None:
            return
        room = self.max_saved_bytes - self.saved_bytes
        if room <= 0:
            self.saved_capped = True
            return
        piece = data[:room]
        try:
            self._file.write(piece)
        except OSError:
            self.saved_capped = True
            return
        self.saved_bytes += len(piece)
        if len(piece) < len(data):
            self.saved_capped = True

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            finally:
                self._file = None

    # --- results ---------------------------------------------------------------------

    def _tail_text(self) -> str:
        data = bytes(self.tail)
        if self.head_dropped:
            start = 0
            while start < len(data) and (data[start] & 0xC0) == 0x80:
                start += 1
            data = data[start:]
            nl = data.find(b"\n")
            if 0 <= nl < len(data) - 1:
                data = data[nl + 1 :]  # the first retained line is partial; drop it
        return clean_terminal_text(data.decode("utf-8", "replace"))

    def truncation(self) -> Truncation:
        text = self._tail_text()
        if not self.head_dropped:
            result = truncate_tail(text, max_lines=self.max_lines, max_bytes=self.max_bytes)
            result.total_bytes = self.total_bytes
            return result
        return truncate_tail(
            text,
            max_lines=self.max_lines,
            max_bytes=self.max_bytes,
            total_lines=self.newlines + 1,
            total_bytes=self.total_bytes,
        )
