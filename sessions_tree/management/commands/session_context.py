"""``session_context``: what Pi derives from a session, as ``pi-oracle/oracle context`` prints it.

    python manage.py session_context SESSION_ID [--leaf ENTRY_ID | --leaf @root] [--canonical-ids]
    python manage.py session_context --file PATH [--leaf ENTRY_ID | --leaf @root] [--canonical-ids]

``--file`` reads a Pi session file (never writing it: a v1/v2 file is migrated in
memory only); SESSION_ID reads a stored session, whose leaf is the persisted one
unless ``--leaf`` says otherwise. Output: one JSON object, 2-space indent, byte for
byte what the oracle prints for the same file and leaf. Errors (missing file, not
a session file, unknown leaf, parent cycle) go to stderr with exit code 2 and
nothing on stdout.
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sessions_tree.jsonl import dumps_pretty, parse_session_text
from sessions_tree.migration import migrate_to_current
from sessions_tree.path import PathError
from sessions_tree.pi_view import DEFAULT, session_view
from sessions_tree.tree import TreeTooLargeError

ROOT_LEAF = "@root"


def _fail(message: str) -> CommandError:
    return CommandError(message, returncode=2)


class Command(BaseCommand):
    help = "Print the context Pi would build for a session (same JSON as pi-oracle's `oracle context`)."

    def add_arguments(self, parser):
        parser.add_argument("session_id", nargs="?", help="id of a stored session")
        parser.add_argument("--file", dest="file", help="a Pi session file (.jsonl) instead of a stored session")
        parser.add_argument("--leaf", help="entry id to use as the leaf, or @root for none (default: Pi's leaf)")
        parser.add_argument(
            "--canonical-ids",
            action="store_true",
            help="rename entry ids to e1, e2, ... in file order (for v1 files, whose ids are random per load)",
        )

    def handle(self, *args, session_id=None, file=None, leaf=None, canonical_ids=False, **options):
        if (session_id is None) == (file is None):
            raise _fail("give either a SESSION_ID or --file PATH (not both)")
        if file is not None:
            header, entries, default_leaf, file_version = self._from_file(Path(file))
        else:
            header, entries, default_leaf, file_version = self._from_store(session_id)
        if leaf is None:
            chosen = default_leaf
        elif leaf == ROOT_LEAF:
            chosen = None
        else:
            chosen = leaf
        try:
            view = session_view(header, entries, chosen, file_version=file_version, canonical_ids=canonical_ids)
        except (PathError, TreeTooLargeError) as exc:
            raise _fail(str(exc)) from exc
        self._write(dumps_pretty(view))

    def _from_file(self, path: Path):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise _fail(f"no such file: {path}") from None
        except OSError as exc:
            raise _fail(f"cannot read {path}: {exc.strerror or exc}") from None
        # Node reads the file as UTF-8 with invalid bytes replaced by U+FFFD.
        parsed = parse_session_text(data.decode("utf-8", errors="replace"))
        if parsed.header is None:
            raise _fail(f"{path} is not a Pi session file: {parsed.header_error}")
        header, entries, _ = migrate_to_current(parsed.header, parsed.entries, positions=parsed.positions)
        return header, entries, DEFAULT, parsed.file_version

    def _from_store(self, session_id: str):
        try:
            from sessions_tree.providers import session_source  # manage.py imports every command module: their imports at use
        except ImportError as exc:
            raise _fail(f"stored sessions are not available (sessions_tree.providers.session_source: {exc})") from exc
        from sessions_tree.errors import SessionTreeError  # manage.py imports every command module: their imports at use

        try:
            header, entries, leaf_id = session_source(session_id)
        except SessionTreeError as exc:  # unknown session and the like: the message says what
            raise _fail(str(exc)) from exc
        # A stored session is a v3 file once exported; its leaf is the persisted one.
        return header, entries, leaf_id, header.get("version", 1)

    def _write(self, text: str) -> None:
        out = getattr(self.stdout, "_out", self.stdout)
        buffer = getattr(out, "buffer", None)
        if buffer is not None and out in (sys.stdout, sys.__stdout__):
            out.flush()
            buffer.write(text.encode("utf-8"))
            buffer.flush()
        else:
            out.write(text)
