"""The sessions the benchmarks read: synthetic Pi files, imported into each provider.

Files are generated once into ``var/bench/files/`` and imported once per
provider and database (tagged ``agent="bench:<shape>:<n>"``), then reused by
later runs; benchmarks that write get a fresh import of their own and delete it.
"""

from __future__ import annotations

from pathlib import Path

from bench.environment import BENCH_DIR
from bench.session_shapes import make_session

FILES = BENCH_DIR / "files"


def session_file(shape: str, n: int) -> Path:
    """The synthetic Pi file of ``n`` entries (generated on first use)."""
    path = FILES / f"{shape}-{n}.jsonl"
    if not path.exists():
        FILES.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(make_session(shape, n).text(), encoding="utf-8")
        tmp.replace(path)
    return path


def _tag(shape: str, n: int) -> str:
    return f"bench:{shape}:{n}"


def stored_session(kind: str, shape: str, n: int, *, using: str = "default") -> str:
    """A session id of the imported ``shape``/``n`` file in provider ``kind`` (reused across runs)."""
    from sessions_tree.models import AgentSession

    path = session_file(shape, n)
    for meta in AgentSession.objects.using(using).filter(agent=_tag(shape, n), provider=kind):
        if meta.entry_count == n and (kind != "file" or Path(meta.session_file).exists()):
            return meta.session_id
        _delete(kind, meta.session_id, using)
    return _import(kind, path, using, _tag(shape, n))


def fresh_session(kind: str, shape: str, n: int, *, using: str = "default") -> str:
    """A new import of the ``shape``/``n`` file, for benchmarks that write (delete it after)."""
    return _import(kind, session_file(shape, n), using, f"bench-scratch:{shape}:{n}")


def delete_session(kind: str, session_id: str, *, using: str = "default") -> None:
    _delete(kind, session_id, using)


def _import(kind: str, path: Path, using: str, tag: str) -> str:
    """Import ``path`` like ``session_import`` does, under a new session id (a file may be imported many times)."""
    from sessions_tree import entries as E
    from sessions_tree import jsonl
    from sessions_tree.ids import new_session_id
    from sessions_tree.pi_files import read_session_file
    from sessions_tree.providers import get_provider

    header, _, pending, diagnostics = read_session_file(path)
    header = E.session_header(session_id=new_session_id(), timestamp=header["timestamp"], cwd=header["cwd"])
    provider = get_provider(kind, using=using)
    meta = provider.create_from_entries(
        header=header,
        header_raw=jsonl.dumps(header),
        pending=pending,
        leaf_id=pending[-1].entry["id"] if pending else None,
        agent=tag,
        diagnostics=diagnostics,
    )
    return meta.session_id


def _delete(kind: str, session_id: str, using: str) -> None:
    from sessions_tree.providers import get_provider

    get_provider(kind, using=using).delete_session(session_id)
