"""Strict readers for ``NETA_*`` environment variables.

Settings read the environment once, through these helpers, and fail loudly on a
value they cannot understand instead of guessing (``NETA_DEBUG=yes`` is an error,
not ``False``).
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

_UNSET = object()


def _raw(name: str) -> str | None:
    """The variable's value, or the contents of the file named by ``NAME_FILE``."""
    value = os.environ.get(name)
    file_name = os.environ.get(f"{name}_FILE")
    if value is not None and file_name is not None:
        raise ImproperlyConfigured(f"set either {name} or {name}_FILE, not both")
    if file_name is not None:
        try:
            return Path(file_name).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE: cannot read {file_name}: {exc}") from exc
    return value


def env_str(name: str, default: str = "") -> str:
    value = _raw(name)
    return default if value is None or value == "" else value


def env_bool(name: str, default: bool) -> bool:
    value = _raw(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise ImproperlyConfigured(f"{name} must be 'true' or 'false', not {value!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {number}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = _raw(name)
    if value is None or value.strip() == "":
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default).strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value


def env_path(name: str, default: Path, *, base: Path) -> Path:
    value = env_str(name, "")
    if not value:
        return default
    path = Path(value).expanduser()
    return path if path.is_absolute() else (base / path)


def secret_files() -> list[str]:
    """The files every ``NETA_*_FILE`` variable names (secrets the tools must not read)."""
    return [value for name, value in sorted(os.environ.items()) if name.startswith("NETA_") and name.endswith("_FILE") and value]


def database_from_url(url: str, *, base: Path) -> dict:
    """A Django ``DATABASES`` entry from ``sqlite:///path`` or ``mysql://user:pw@host:port/db``."""
    parsed = urlparse(url)
    scheme = parsed.scheme.lower()
    if scheme == "sqlite":
        raw_path = unquote(parsed.path)
        if parsed.netloc:
            raise ImproperlyConfigured("sqlite URLs look like sqlite:///relative/path or sqlite:////abs/path")
        path = Path(raw_path[1:]) if raw_path.startswith("/") else Path(raw_path)
        if not path.is_absolute():
            path = base / path
        return sqlite_database(path)
    if scheme in ("mysql", "mariadb"):
        name = unquote(parsed.path.lstrip("/"))
        if not name:
            raise ImproperlyConfigured(f"database URL {url!r} names no database")
        options = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
        return mysql_database(
            name=name,
            user=unquote(parsed.username or "root"),
            password=unquote(parsed.password or ""),
            host=parsed.hostname or "127.0.0.1",
            port=parsed.port or 3306,
            options=options,
        )
    raise ImproperlyConfigured(f"unsupported database URL scheme {scheme!r} (use sqlite or mysql)")


def sqlite_database(path: Path) -> dict:
    return {
        "ENGINE": "infra.sqlite_backend",  # Django's, with writers queued (infra/sqlite_backend/base.py)
        "NAME": str(path),
        # Several processes (web, workers, tests' children) share the file.
        "OPTIONS": {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
        # File-backed test database so that child processes see it too; one per
        # test run (pid), so that concurrent runs never share or delete each other's.
        "TEST": {"NAME": str(path.with_name(f"test-{os.getpid()}-{path.name}"))},
    }


def mysql_database(*, name: str, user: str, password: str, host: str, port: int, options: dict) -> dict:
    return {
        "ENGINE": "infra.mysql_backend",  # Django's, connections lent from a pool (infra/mysql_backend/base.py)
        "NAME": name,
        "USER": user,
        "PASSWORD": password,
        "HOST": host,
        "PORT": str(port),
        "CONN_MAX_AGE": 0,
        "OPTIONS": {
            "charset": "utf8mb4",
            "isolation_level": "read committed",
            "init_command": "SET sql_mode='STRICT_TRANS_TABLES,NO_ZERO_DATE,NO_ENGINE_SUBSTITUTION'",
            **options,
        },
        "TEST": {"NAME": f"test_{name}_{os.getpid()}", "CHARSET": "utf8mb4", "COLLATION": "utf8mb4_unicode_ci"},
    }


def installation_key(path: Path) -> str:
    """The random key kept in ``path``, made on first use (0600).

    Written whole under a temporary name, then linked into place: of several processes
    starting at once on a new folder (a server and its workers) one key wins and every
    one reads it complete (an ``O_EXCL`` create left a moment where the file was empty,
    and the loser of the create stopped with ``FileExistsError``)."""
    try:
        key = path.read_text(encoding="utf-8").strip()
        if key:
            return key
    except FileNotFoundError:
        pass
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(secrets.token_urlsafe(50))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process's key is in place: that is the key
    finally:
        os.unlink(tmp)
    key = path.read_text(encoding="utf-8").strip()
    if not key:
        raise ImproperlyConfigured(f"{path} is empty: delete it (a new key is made) or set NETA_SECRET_KEY")
    return key
