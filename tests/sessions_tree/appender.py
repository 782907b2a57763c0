"""Child process of the crash tests: appends to a file-provider session until it is killed.

    python tests/sessions_tree/appender.py append SESSION_ID SEED [--crash KIND:N]
    python tests/sessions_tree/appender.py serve
    python tests/sessions_tree/appender.py burst SESSION_ID COUNT TAG

``append`` appends entries of mixed types and sizes (a few bytes to a few
hundred KB, non-ASCII text included) through ``get_provider("file")`` and
prints one line per acknowledged step on stdout, flushed at once:

    A <id>   an append returned (the entry is durable and the leaf moved to it)
    F <id>   ``begin_in_flight`` returned (the entry is in flight)
    R <id>   an in-flight entry left behind by a killed run was finalized as aborted

It never stops by itself before 100000 steps. ``--crash`` makes the process
kill itself with SIGKILL at a chosen point of its N-th append, to hit moments a
random kill rarely hits: ``mid-write`` (part of the line is written),
``torn-newline`` (all of the line but its newline is written), ``after-sync``
(the line is durable, the meta row not yet committed).

``burst`` (for the concurrency test) appends COUNT user messages "TAG-<i>" as
fast as it can once a line arrives on stdin, printing ``A <id>`` for each.

``serve`` is a fork server: it does the slow part (Python + Django start-up)
once and then forks one fresh child per command read from stdin (one JSON
object a line), replying with one JSON line on stdout:

    {"cmd": "append", "session": ID, "seed": N, "acks": PATH, "crash": "mid-write:3"|null}
        -> {"pid": PID}          the child runs ``append`` with stdout going to PATH
    {"cmd": "reap", "pid": PID}  -> {"pid": PID, "signal": SIG|null, "exit": CODE|null}
    {"cmd": "verify", "session": ID, "out": PATH}
        -> {"pid": PID, "exit": CODE}   a child wrote what a new process reads to PATH
    {"cmd": "quit"}

The server itself never opens a session or a database connection, so every
child starts from nothing but what is stored. The environment chooses the
database and the sessions directory (``NETA_DATABASE_URL``, ``NETA_SESSIONS_DIR``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TEXT_ALPHABET = "abcdefghij klmnopqrstuvwxyz ÄÖÜß é€ 🎉🌍 \"\\/\n\t{}[],:"


def _setup_django() -> None:
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")
    import django

    django.setup()


def random_text(rng: random.Random, size: int) -> str:
    """About ``size`` characters of mixed text; big texts repeat a random 4 KB block."""
    if size <= 4096:
        return "".join(rng.choices(TEXT_ALPHABET, k=size))
    block = "".join(rng.choices(TEXT_ALPHABET, k=4096))
    return (block * (size // 4096 + 1))[:size]


def random_size(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.55:
        return rng.randint(0, 600)
    if roll < 0.85:
        return rng.randint(600, 40_000)
    return rng.randint(100_000, 400_000)


def _ack(kind: str, entry_id: str) -> None:
    os.write(1, f"{kind} {entry_id}\n".encode())


def _install_crash(spec: str | None, rng: random.Random) -> None:
    """Make the N-th append of this process die at the point ``spec`` names."""
    if not spec:
        return
    kind, _, n = spec.partition(":")
    target = int(n or "1")
    from sessions_tree.providers import file as file_mod

    if kind in ("mid-write", "torn-newline"):
        original_write = file_mod.write_all
        seen = {"n": 0}

        def tearing_write(fd: int, data: bytes) -> None:
            if data == b"\n":  # a tail repair, not an append
                return original_write(fd, data)
            seen["n"] += 1
            if seen["n"] == target:
                # mid-write: anything from one byte to all but the newline reaches
                # the file; torn-newline: all of it but the newline.
                cut = len(data) - 1 if kind == "torn-newline" else rng.randint(1, len(data) - 1)
                original_write(fd, data[:cut])
                os.kill(os.getpid(), signal.SIGKILL)
            return original_write(fd, data)

        file_mod.write_all = tearing_write
    elif kind == "after-sync":
        original_append = file_mod.FileProvider._store_append
        seen = {"n": 0}

        def dying_append(self, meta, index, pending):
            original_append(self, meta, index, pending)
            seen["n"] += 1
            if seen["n"] == target:
                os.kill(os.getpid(), signal.SIGKILL)

        file_mod.FileProvider._store_append = dying_append
    else:
        raise SystemExit(f"unknown crash kind {kind!r} (use mid-write:N, torn-newline:N or after-sync:N)")


def run_appender(session_id: str, seed: int, crash: str | None = None, steps: int = 100_000) -> None:
    from sessions_tree.errors import EntryNotFound
    from sessions_tree.providers import get_provider

    rng = random.Random(seed)
    _install_crash(crash, rng)
    provider = get_provider("file")
    stale = provider.get_in_flight(session_id)
    if stale is not None:
        try:
            provider.finalize_in_flight(session_id, stale["id"], status="aborted")
            _ack("R", stale["id"])
        except EntryNotFound:
            pass  # the dead writer had stored it already; the recovery adopted it
    for step in range(steps):
        roll = rng.random()
        text = random_text(rng, random_size(rng))
        ts = 1_700_000_000_000 + seed * 1_000_000 + step
        if roll < 0.35:
            entry = provider.append_message(
                session_id, {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}
            )
        elif roll < 0.55:
            entry = provider.append_message(session_id, _assistant(text, ts))
        elif roll < 0.65:
            entry = provider.append_message(
                session_id,
                {
                    "role": "toolResult",
                    "toolCallId": f"call-{step}",
                    "toolName": "read",
                    "content": [{"type": "text", "text": text}],
                    "isError": False,
                    "timestamp": ts,
                },
            )
        elif roll < 0.72:
            entry = provider.append_custom_entry(session_id, custom_type="crash-test", data={"step": step, "blob": text})
        elif roll < 0.78:
            entry = provider.append_custom_message(session_id, custom_type="note", content=text, display=True)
        elif roll < 0.82:
            entry = provider.append_model_change(session_id, provider="anthropic", model_id=f"m-{step % 3}")
        elif roll < 0.86:
            target = provider.get_session(session_id).leaf_entry_id
            if target is None:
                continue
            entry = provider.append_label_change(session_id, target_id=target, label=f"step {step}")
        else:
            entry = provider.begin_in_flight(session_id, _assistant("", ts))
            _ack("F", entry["id"])
            for cut in range(0, len(text), max(1, len(text) // 3)):
                provider.update_in_flight_entry(session_id, entry["id"], _assistant(text[:cut], ts))
            entry = provider.finalize_in_flight(session_id, entry["id"], _assistant(text, ts))
        _ack("A", entry["id"])


def _assistant(text: str, ts: int) -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}] if text else [],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-test",
        "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2, "cost": {"total": 0}},
        "stopReason": "stop",
        "timestamp": ts,
    }


def read_back(session_id: str) -> dict:
    """What a process that starts from nothing reads: entries, leaf, context, counters."""
    from sessions_tree.providers import get_provider

    provider = get_provider("file")
    meta = provider.get_session(session_id)
    ctx = provider.build_context(session_id)
    return {
        "entryIds": [e["id"] for e in provider.list_entries(session_id)],
        "leaf": meta.leaf_entry_id,
        "inFlight": meta.in_flight_entry_id,
        "contextIds": list(ctx.source_entry_ids),
        "messageCount": len(ctx.messages),
    }


def serve() -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for line in sys.stdin:
        command = json.loads(line)
        cmd = command["cmd"]
        if cmd == "quit":
            break
        if cmd == "reap":
            _, status = os.waitpid(command["pid"], 0)
            reply = {
                "pid": command["pid"],
                "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            }
        elif cmd in ("append", "verify"):
            pid = os.fork()
            if pid == 0:
                _child(command)  # never returns
            reply = {"pid": pid}
            if cmd == "verify":
                _, status = os.waitpid(pid, 0)
                reply["exit"] = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
        else:
            reply = {"error": f"unknown command {cmd!r}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


def _child(command: dict) -> None:
    code = 0
    try:
        os.setpgid(0, 0)  # the test kills this child, never the server
        if command["cmd"] == "append":
            fd = os.open(command["acks"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 1)
            os.close(fd)
            run_appender(command["session"], command["seed"], command.get("crash"))
        else:
            result = read_back(command["session"])
            Path(command["out"]).write_text(json.dumps(result), encoding="utf-8")
    except BaseException as exc:  # report, then leave without running the server's cleanup
        import traceback

        os.write(2, f"appender child failed: {exc!r}\n{traceback.format_exc()}".encode())
        code = 1
    os._exit(code)


def burst(session_id: str, count: int, tag: str) -> None:
    """Say ``ready``, wait for a line on stdin, then append ``count`` messages as fast as possible."""
    from sessions_tree.providers import get_provider

    provider = get_provider("file")
    provider.get_session(session_id)  # connect before the start line
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(count):
        message = {"role": "user", "content": [{"type": "text", "text": f"{tag}-{i}"}], "timestamp": i}
        entry = provider.append_message(session_id, message)
        _ack("A", entry["id"])


def main(argv: list[str]) -> None:
    _setup_django()
    if argv[:1] == ["serve"]:
        serve()
    elif argv[:1] == ["burst"] and len(argv) == 4:
        burst(argv[1], int(argv[2]), argv[3])
    elif argv[:1] == ["append"] and len(argv) in (3, 5):
        crash = argv[4] if len(argv) == 5 and argv[3] == "--crash" else None
        run_appender(argv[1], int(argv[2]), crash)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
