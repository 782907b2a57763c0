"""Provider fixtures: every contract test runs on the file provider, the mysql
provider on SQLite, and the mysql provider on the real MariaDB server."""

from __future__ import annotations

from tests.support.providers import provider  # noqa: F401 - the fixture
