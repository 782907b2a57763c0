"""Errors the kernel raises; each names what was wrong."""


class SessionTreeError(Exception):
    """Base class: a request the session store refuses, with a message for the user."""

    code = "session_error"

    def __init__(self, message: str = "", *, field: str | None = None):
        super().__init__(message)
        # The input field the error is about (``header.id``, ``entry`` …), if any.
        self.field = field


class SessionNotFound(SessionTreeError):
    code = "session_not_found"


class EntryNotFound(SessionTreeError):
    code = "entry_not_found"


class SessionBusy(SessionTreeError):
    """An entry is in flight; the tree takes no other append until it is finalized."""

    code = "session_busy"


class InvalidEntry(SessionTreeError):
    code = "invalid_entry"


class InvalidSessionFile(SessionTreeError):
    code = "invalid_session_file"


class SessionIdTaken(InvalidSessionFile):
    """A new session names an id that is already stored (an import then takes a fresh one)."""


class ResyncNeeded(SessionTreeError):
    """The event log no longer reaches back to the requested revision: take a fresh snapshot."""

    code = "resync_needed"
