"""Running a tool's command: process containment, limits and the bubblewrap sandbox.

Every command runs

* in its own session and process group (``start_new_session``), with stdin from
  ``/dev/null`` and stdout+stderr on one pipe;
* with resource limits: file size (``RLIMIT_FSIZE``, so ``yes > file`` stops),
  open files, memory per process (``RLIMIT_DATA``), no core dumps, set by a small ``/bin/sh`` launcher (and
  ``setpriv --pdeathsig KILL`` when util-linux has it, so the shell dies with
  the thread that started it);
* in a per-run cgroup when the host lets this process create one (cgroup v2
  ``cgroup.kill`` to end every descendant at once, even ones that called
  ``setsid``; a ``pids`` cgroup, v1 or v2, to cap the number of processes so a
  fork bomb is stopped at the limit and then killed);
* so that it dies with the server: a watcher kills the run's cgroups and
  process group when the server's end of a pipe closes (see ``WATCHER``);
* under bubblewrap when the context's sandbox is ``"bwrap"`` (``NETA_SANDBOX=auto``,
  the default, picks it when :func:`bwrap_status` shows it works): read-only system
  directories, only the workspace roots writable, a private ``/tmp``, its own PID
  namespace (when the command ends or is killed, everything it started dies
  with it), ``--die-with-parent``, all capabilities dropped, and no network
  unless allowed.

The command ends when it exits, times out, is cancelled, or breaks a limit; in
every case whatever it left running is killed before :func:`run_command`
returns. With ``NETA_SANDBOX=none`` and no usable cgroup, only the process group
can be killed: a descendant that called ``setsid`` may survive (see
docs/tools.md).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import glob
import logging
import os
import selectors
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from infra.cpu_affinity import spawning
from infra.lazy_settings import settings  # no Django at a subagent child's start-up
from infra.memo import recent
from toolcatalog.shared_types import CancelSignal

logger = logging.getLogger(__name__)
SHELLS = ("/bin/bash", "/usr/bin/bash", "/bin/sh")

# /etc entries a command plausibly needs; everything else in /etc (shadow,
# credentials, service configs) stays invisible inside the sandbox.
ETC_ALLOWLIST = (
    "passwd", "group", "nsswitch.conf", "hosts", "host.conf", "resolv.conf", "gai.conf",
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "alternatives",
    "ssl", "ca-certificates", "ca-certificates.conf", "pki", "bash.bashrc", "profile",
    "profile.d", "inputrc", "mime.types", "magic", "magic.mime", "gitconfig", "locale.alias",
    "locale.gen", "os-release", "lsb-release", "debian_version", "terminfo", "python3*",
    "perl", "vim", "mailcap", "protocols", "services", "java-*", "maven", "npmrc",
)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt")
SANDBOX_HOME = "/tmp/home"

_POLL = 0.05


# --- limits -----------------------------------------------------------------------


DEFAULT_MAX_PROCESSES = 256
DEFAULT_MAX_FILE_MB = 1024
DEFAULT_MAX_OPEN_FILES = 4096
DEFAULT_MAX_MEMORY_MB = 4096
DEFAULT_MAX_TIMEOUT = 3600.0


@dataclass(frozen=True, slots=True)
class ProcessLimits:
    """Per-command limits. ``from_settings`` reads the ``NETA_BASH_*`` settings (docs/tools.md)."""

    max_processes: int = DEFAULT_MAX_PROCESSES
    max_file_bytes: int = DEFAULT_MAX_FILE_MB * 1024 * 1024
    max_open_files: int = DEFAULT_MAX_OPEN_FILES
    max_memory_bytes: int = DEFAULT_MAX_MEMORY_MB * 1024 * 1024
    max_timeout: float = DEFAULT_MAX_TIMEOUT

    @classmethod
    def from_settings(cls) -> ProcessLimits:
        if not settings.configured:
            return cls()
        return cls(
            max_processes=int(getattr(settings, "NETA_BASH_MAX_PROCESSES", DEFAULT_MAX_PROCESSES)),
            max_file_bytes=int(getattr(settings, "NETA_BASH_MAX_FILE_MB", DEFAULT_MAX_FILE_MB)) * 1024 * 1024,
            max_open_files=int(getattr(settings, "NETA_BASH_MAX_OPEN_FILES", DEFAULT_MAX_OPEN_FILES)),
            max_memory_bytes=int(getattr(settings, "NETA_BASH_MAX_MEMORY_MB", DEFAULT_MAX_MEMORY_MB)) * 1024 * 1024,
            max_timeout=float(getattr(settings, "NETA_BASH_MAX_TIMEOUT", DEFAULT_MAX_TIMEOUT)),
        )


# --- cgroups ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CgroupSupport:
    """Where this process may create per-run cgroups (``None`` when it may not)."""

    v2_base: Path | None = None  # under the unified hierarchy: cgroup.kill, membership
    v2_pids: bool = False  # the v2 base can limit pids itself
    v1_pids_base: Path | None = None  # a v1 pids hierarchy, when v2 cannot limit
    reason: str = ""

    @property
    def describe(self) -> str:
        parts = []
        if self.v2_base:
            parts.append("cgroup2" + ("+pids" if self.v2_pids else ""))
        if self.v1_pids_base:
            parts.append("cgroup1-pids")
        return "+".join(parts) or "process-group"


def _mounts() -> list[tuple[str, str, str]]:
    out = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                fields = left.split()
                rfields = right.split()
                if len(fields) >= 5 and len(rfields) >= 3:
                    out.append((fields[4], rfields[0], rfields[2]))  # mount point, fstype, super options
    except OSError:
        pass
    return out


def _own_cgroups() -> dict[str, str]:
    """controller (or '' for v2) → this process's cgroup path."""
    paths: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as fh:
            for line in fh:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3:
                    for ctrl in parts[1].split(",") if parts[1] else [""]:
                        paths[ctrl] = parts[2]
    except OSError:
        pass
    return paths


def _prepare_base(path: Path) -> bool:
    try:
        path.mkdir(exist_ok=True)
        probe = path / f"probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return False
    _reap_stale(path)
    return True


def _reap_stale(base: Path) -> None:
    """Remove per-run cgroups left by processes that no longer exist."""
    try:
        children = list(base.iterdir())
    except OSError:
        return
    for child in children:
        owner = child.name.split("-", 1)[0]
        if not owner.isdigit() or child.is_file():
            continue
        if int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}"):
            try:
                child.rmdir()
            except OSError:
                pass


@functools.cache
def cgroup_support() -> CgroupSupport:
    if settings.configured and getattr(settings, "NETA_TOOLS_NO_CGROUP", False):  # tests exercise the fallback
        return CgroupSupport(reason="disabled by NETA_TOOLS_NO_CGROUP")
    mounts = _mounts()
    own = _own_cgroups()
    v2_base = None
    v2_pids = False
    v1_pids = None
    for mount_point, fstype, _options in mounts:
        if fstype == "cgroup2" and v2_base is None:
            base = Path(mount_point + own.get("", "/").rstrip("/")) / "neta-tools"
            if _prepare_base(base):
                v2_base = base
                try:
                    ctrl = (base / "cgroup.controllers").read_text()
                    if "pids" not in ctrl.split():
                        (base / "cgroup.subtree_control").write_text("+pids")  # needs it in the parent too
                    v2_pids = "pids" in (base / "cgroup.subtree_control").read_text().split()
                except OSError:
                    v2_pids = False
    if not v2_pids:
        for mount_point, fstype, options in mounts:
            if fstype == "cgroup" and "pids" in options.split(","):
                base = Path(mount_point + own.get("pids", "/").rstrip("/")) / "neta-tools"
                if _prepare_base(base):
                    v1_pids = base
                break
    reason = "" if (v2_base or v1_pids) else "no writable cgroup hierarchy for this process"
    return CgroupSupport(v2_base=v2_base, v2_pids=v2_pids, v1_pids_base=v1_pids, reason=reason)


class ProcessCage:
    """The per-run cgroups of one command (possibly none)."""

    def __init__(self, limits: ProcessLimits, support: CgroupSupport | None = None) -> None:
        self.support = support or cgroup_support()
        self.limits = limits
        self.dirs: list[Path] = []
        self.kill_file: Path | None = None
        self.pids_dir: Path | None = None
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        if self.support.v2_base:
            d = self.support.v2_base / name
            if self._mkdir(d):
                if (d / "cgroup.kill").exists():
                    self.kill_file = d / "cgroup.kill"
                if self.support.v2_pids and self._limit(d):
                    self.pids_dir = d
        if self.pids_dir is None and self.support.v1_pids_base:
            d = self.support.v1_pids_base / name
            if self._mkdir(d) and self._limit(d):
                self.pids_dir = d
        self.procs_paths = [os.fspath(d / "cgroup.procs") for d in self.dirs]

    def _mkdir(self, d: Path) -> bool:
        try:
            d.mkdir()
        except OSError:
            return False
        self.dirs.append(d)
        return True

    def _limit(self, d: Path) -> bool:
        try:
            (d / "pids.max").write_text(str(self.limits.max_processes))
            return True
        except OSError:
            return False

    @property
    def describe(self) -> str:
        parts = []
        if self.kill_file:
            parts.append("cgroup.kill")
        if self.pids_dir:
            parts.append(f"pids.max={self.limits.max_processes}")
        return ", ".join(parts) or "process group only"

    def pids(self) -> list[int]:
        for d in self.dirs:
            try:
                return [int(x) for x in (d / "cgroup.procs").read_text().split()]
            except OSError:
                continue
        return []

    def fork_refused(self) -> bool:
        """Whether the pids limit has refused a fork (the command hit the process limit)."""
        if self.pids_dir is None:
            return False
        try:
            for line in (self.pids_dir / "pids.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "max" and value.strip() not in ("", "0"):
                    return True
        except OSError:
            pass
        return False

    def kill_all(self, *, exclude: int | None = None) -> int:
        """SIGKILL every process in the cage; returns how many were found (``exclude`` not counted)."""
        if not self.dirs:
            return 0
        found = set(self.pids())
        if self.kill_file is not None:
            try:
                self.kill_file.write_text("1")
            except OSError:
                self.kill_file = None
        if self.kill_file is None:
            for _ in range(200):  # a capped fork bomb converges: the killed cannot fork
                pids = self.pids()
                if not pids:
                    break
                found.update(pids)
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(0.005)
        found.discard(exclude)
        return len(found)

    def close(self, wait: float = 2.0) -> None:
        deadline = time.monotonic() + wait
        for d in reversed(self.dirs):
            while True:
                try:
                    d.rmdir()
                    break
                except OSError as exc:
                    if exc.errno == errno.ENOENT:
                        break
                    if time.monotonic() > deadline:
                        break  # left for _reap_stale once this process is gone
                    self.kill_all()
                    time.sleep(0.001)
        self.dirs = []


# --- bubblewrap -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BwrapStatus:
    available: bool
    path: str | None
    reason: str


def bwrap_binary() -> tuple[str, str | None]:
    """(what ``NETA_SANDBOX_BWRAP`` names, the executable it resolves to or None)."""
    configured = "bwrap"
    try:
        if settings.configured:
            configured = str(getattr(settings, "NETA_SANDBOX_BWRAP", "") or "bwrap")
    except Exception:  # noqa: BLE001 - plain-Python use
        pass
    if os.sep in configured:
        return configured, configured if os.access(configured, os.X_OK) and os.path.isfile(configured) else None
    return configured, _which(configured)


# A search of PATH per tool context was ~1 % of a turn: its answer is kept a few seconds
# (per name and PATH), so a bwrap installed meanwhile is still found soon.
_which_found: dict = {}
_WHICH_SECONDS = 5.0


def _which(name: str) -> str | None:
    return recent(_which_found, (name, os.environ.get("PATH", "")), _WHICH_SECONDS, lambda: shutil.which(name))


def bwrap_status() -> BwrapStatus:
    """Whether bubblewrap exists *and* can create its namespaces here (probed once per binary)."""
    configured, path = bwrap_binary()
    if path is None:
        where = "on PATH" if os.sep not in configured else "there"
        return BwrapStatus(
            False, None, f"bwrap is not installed ({configured!r} is not an executable {where}; Debian package 'bubblewrap')"
        )
    return _probe_bwrap(path)


@functools.cache
def _probe_bwrap(path: str) -> BwrapStatus:
    argv = [path, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--unshare-pid",
            "--unshare-net", "--unshare-ipc", "--die-with-parent", "--cap-drop", "ALL", "/bin/true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return BwrapStatus(False, path, f"bwrap could not be started: {exc}")
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
        return BwrapStatus(False, path, f"bwrap cannot create namespaces here: {err}")
    return BwrapStatus(True, path, "ok")


@dataclass(frozen=True, slots=True)
class SandboxChoice:
    """The sandbox commands get: ``configured`` (``NETA_SANDBOX``) resolved to ``mode``."""

    configured: str
    mode: str  # "bwrap" | "none"
    reason: str

    @property
    def fell_back(self) -> bool:
        """``auto`` found no working bubblewrap and runs commands unsandboxed."""
        return self.configured == "auto" and self.mode == "none"

    @property
    def describe(self) -> str:
        if self.mode == "bwrap":
            if self.configured == "auto":
                return "bwrap (auto)"
            return "bwrap" if self.reason == "configured" else f"bwrap — not working, every bash call fails: {self.reason}"
        return f"none — {self.reason}"

    def to_dict(self) -> dict[str, str]:
        return {"configured": self.configured, "mode": self.mode, "reason": self.reason}


_warned: set[str] = set()


def resolve_sandbox(configured: str) -> SandboxChoice:
    """``auto`` → bwrap when the probe says it works, else none (logged once per reason)."""
    if configured == "bwrap":
        status = bwrap_status()
        return SandboxChoice("bwrap", "bwrap", "configured" if status.available else status.reason)
    if configured == "none":
        return SandboxChoice("none", "none", "NETA_SANDBOX=none")
    if configured != "auto":
        raise ValueError(f"NETA_SANDBOX must be auto, none or bwrap, not {configured!r}")
    status = bwrap_status()
    if status.available:
        return SandboxChoice("auto", "bwrap", "bubblewrap works here")
    choice = SandboxChoice("auto", "none", status.reason)
    if choice.reason not in _warned:
        _warned.add(choice.reason)
        logger.warning(
            "NETA_SANDBOX=auto: bash tool commands run WITHOUT a sandbox (none), because %s. "
            "Install bubblewrap and allow user namespaces (docs/tools.md).",
            choice.reason,
        )
    return choice


def effective_sandbox() -> SandboxChoice:
    """This process's sandbox: ``settings.NETA_SANDBOX`` (default ``auto``) resolved."""
    configured = "auto"
    try:
        if settings.configured:
            configured = getattr(settings, "NETA_SANDBOX", "auto")
    except Exception:  # noqa: BLE001 - plain-Python use
        pass
    return resolve_sandbox(configured)


def reset_sandbox_probe() -> None:
    """Forget the probe results (tests that change the binary or PATH)."""
    _probe_bwrap.cache_clear()
    _warned.clear()
    _which_found.clear()


@functools.cache
def _system_binds() -> tuple[str, ...]:
    args: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for pattern in ETC_ALLOWLIST:
        for p in sorted(glob.glob(os.path.join("/etc", pattern))):
            args += ["--ro-bind-try", p, p]
    return tuple(args)


def _extra_ro_bind_paths() -> list[str]:
    try:
        return [str(p) for p in getattr(settings, "NETA_SANDBOX_RO_BINDS", []) or []]
    except Exception:
        return []


def _extra_ro_binds() -> list[str]:
    args: list[str] = []
    for p in _extra_ro_bind_paths():
        args += ["--ro-bind-try", p, p]
    return args


def _masks(roots: Sequence[Path], protected: Sequence[Path]) -> list[str]:
    """Hide the protected paths that lie inside a bound path (an empty file or directory over
    them). A bind is compared by its real path too (a symlinked folder shows its target)."""
    args: list[str] = []
    bound = {os.fspath(r).rstrip("/") or "/" for r in roots} | {os.path.realpath(r) for r in roots}
    for p in protected:
        ps = os.fspath(p)
        if not any(ps == b or ps.startswith(b.rstrip("/") + "/") for b in bound):
            continue
        if os.path.isdir(ps):
            args += ["--tmpfs", ps]
        elif os.path.lexists(ps):
            args += ["--ro-bind", "/dev/null", ps]
    return args


def bwrap_argv(
    *,
    roots: Sequence[Path],
    cwd: Path,
    network: bool,
    command: Sequence[str],
    protected: Sequence[Path] = (),
    ro_binds: Sequence[str] = (),
) -> list[str]:
    """bubblewrap's argv for ``command``. ``ro_binds``: more paths visible read-only (an MCP
    server's install directory, docs/tools.md "MCP tools")."""
    status = bwrap_status()
    if not status.available:
        raise SandboxUnavailable(f"NETA_SANDBOX=bwrap but {status.reason}")
    args = [
        status.path or "bwrap",
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname", "neta-sandbox",
        "--cap-drop", "ALL",
    ]
    if not network:
        args.append("--unshare-net")
    args += list(_system_binds())
    args += _extra_ro_binds()
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", SANDBOX_HOME,
             "--tmpfs", "/var/tmp", "--tmpfs", "/run"]
    for root in roots:
        args += ["--bind", os.fspath(root), os.fspath(root)]
    for p in ro_binds:
        args += ["--ro-bind-try", os.fspath(p), os.fspath(p)]
    # Last, so that no bind made above can show a protected path again.
    args += _masks([*roots, *map(Path, ro_binds), *map(Path, _extra_ro_bind_paths())], protected)
    args += ["--chdir", os.fspath(cwd), "--"]
    args += list(command)
    return args


class SandboxUnavailable(RuntimeError):
    pass


def shell_argv(command: str) -> list[str]:
    shell = next((s for s in SHELLS if os.access(s, os.X_OK)), "/bin/sh")
    return [shell, "-c", command]


# --- running --------------------------------------------------------------------


@dataclass(slots=True)
class CommandOutcome:
    exit_code: int | None
    timed_out: bool = False
    cancelled: bool = False
    limit_hit: str | None = None
    duration: float = 0.0
    killed_leftovers: int = 0
    containment: str = ""


# The command is started through a tiny /bin/sh launcher instead of a Python
# ``preexec_fn`` (which forces a slow fork of the whole server process: ~20 ms
# instead of ~4 ms here). The launcher joins the per-run cgroups, sets the
# resource limits (``ulimit -f`` counts 512-byte blocks in POSIX shells) and
# execs the command through ``setpriv --pdeathsig KILL`` when util-linux has it
# (else ``PR_SET_PDEATHSIG`` is set with prctl in a ``preexec_fn``), so the
# command dies with the thread that started it.
LAUNCHER = (
    'n=$1; shift; '
    'while [ "$n" -gt 0 ]; do echo $$ 2>/dev/null > "$1"; shift; n=$((n-1)); done; '
    'ulimit -f "$1" 2>/dev/null; ulimit -n "$2" 2>/dev/null; ulimit -d "$3" 2>/dev/null; ulimit -c 0 2>/dev/null; shift 3; '
    'exec "$@"'
)
# A parent-death signal reaches only the command itself, not what it started. So
# every command also gets a *watcher*: a tiny shell in its own session, blocked
# reading a pipe whose write end only the server holds. When the server dies
# (SIGKILL included) the kernel closes that end, the read returns, and the
# watcher kills the run's cgroups (``cgroup.kill``) and its process group, then
# exits. When the command ends normally the server kills the watcher first.
# (The group's id cannot be reused while the group has members, so the watcher
# never hits a stranger.)
WATCHER = 'pg=$1; shift; read _; for f in "$@"; do echo 1 2>/dev/null > "$f"; done; kill -9 "-$pg" 2>/dev/null'
SETPRIV_BINARIES = ("/usr/bin/setpriv", "/bin/setpriv")
PR_SET_PDEATHSIG = 1


@functools.cache
def _pdeathsig_prefix() -> tuple[str, ...]:
    path = next((p for p in SETPRIV_BINARIES if os.access(p, os.X_OK)), None)
    if path is None:
        return ()
    try:
        done = subprocess.run([path, "--pdeathsig", "KILL", "--", "/bin/true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return (path, "--pdeathsig", "KILL", "--") if done.returncode == 0 else ()


def _set_pdeathsig() -> None:  # pragma: no cover - runs in the child, only without setpriv

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def launcher_argv(argv: Sequence[str], *, limits: ProcessLimits, cage: ProcessCage) -> list[str]:
    blocks = max(1, -(-limits.max_file_bytes // 512))
    return [
        "/bin/sh", "-c", LAUNCHER, "neta-launch",
        str(len(cage.procs_paths)), *cage.procs_paths,
        str(blocks), str(limits.max_open_files), str(max(1, limits.max_memory_bytes // 1024)),
        *_pdeathsig_prefix(), *argv,
    ]


def _start_watcher(pgid: int, cage: ProcessCage) -> tuple[subprocess.Popen | None, int | None]:
    """The watcher of group ``pgid`` and the write end of its pipe (None, None if it cannot start)."""
    read_end, write_end = os.pipe()
    kill_files = [os.fspath(d / "cgroup.kill") for d in cage.dirs if (d / "cgroup.kill").exists()]
    try:
        watcher = subprocess.Popen(
            ["/bin/sh", "-c", WATCHER, "neta-watch", str(pgid), *kill_files],
            stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True, env={}, cwd="/",  # builtins only; nothing of the server's
        )
    except OSError:
        os.close(write_end)
        return None, None
    finally:
        os.close(read_end)
    return watcher, write_end


def _stop_watcher(watcher: subprocess.Popen | None, write_end: int | None) -> None:
    if watcher is not None:
        try:
            watcher.kill()
        except OSError:
            pass
        watcher.wait()
    if write_end is not None:
        os.close(write_end)


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


@dataclass(slots=True)
class _Clock:
    start: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return time.monotonic() - self.start


def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float | None,
    cancel: CancelSignal,
    on_output: Callable[[bytes], None],
    limits: ProcessLimits | None = None,
) -> CommandOutcome:
    """Run ``argv`` contained and limited; stream its output; kill everything at the end."""
    limits = limits or ProcessLimits.from_settings()
    cage = ProcessCage(limits)
    clock = _Clock()
    outcome = CommandOutcome(exit_code=None, containment=cage.describe)
    try:
        with spawning():  # the command gets every CPU, not the web process's one (infra/cpu_affinity.py)
            proc = subprocess.Popen(
                launcher_argv(argv, limits=limits, cage=cage),
                cwd=os.fspath(cwd),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                preexec_fn=None if _pdeathsig_prefix() else _set_pdeathsig,
            )
    except BaseException:
        cage.close()
        raise
    pgid = proc.pid
    watcher, death_pipe = _start_watcher(pgid, cage)
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    reading = True
    exited_at: float | None = None
    deadline = clock.start + timeout if timeout else None
    next_watch = 0.0
    try:
        while True:
            if cancel.is_set():
                outcome.cancelled = True
                break
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                outcome.timed_out = True
                break
            if now >= next_watch:
                next_watch = now + 0.1
                if cage.fork_refused():
                    outcome.limit_hit = "processes"
                    break
            wait = _POLL if deadline is None else max(0.0, min(_POLL, deadline - now))
            if reading:
                if sel.select(wait):
                    try:
                        chunk = os.read(fd, 65536)
                    except BlockingIOError:
                        chunk = None
                    if chunk:
                        on_output(chunk)
                    elif chunk == b"":
                        reading = False
                        sel.unregister(fd)
            else:
                try:
                    proc.wait(wait)
                except subprocess.TimeoutExpired:
                    pass
            if proc.poll() is not None:
                if not reading:
                    break
                if exited_at is None:
                    exited_at = time.monotonic()
                elif time.monotonic() - exited_at > 0.2:
                    break  # something it started still holds the output pipe
    finally:
        _stop_watcher(watcher, death_pipe)
        leftovers = cage.kill_all(exclude=proc.pid)
        _killpg(pgid)
        if proc.poll() is None:
            try:
                proc.kill()
            except OSError:
                pass
        proc.wait()
        # What is still in the pipe (written before the kill) is part of the output.
        end = time.monotonic() + 0.5
        while reading and time.monotonic() < end:
            if not sel.select(0.05):
                continue
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            except OSError:
                break
            if not chunk:
                break
            on_output(chunk)
        sel.close()
        proc.stdout.close()
        cage.close()
    if not (outcome.timed_out or outcome.cancelled or outcome.limit_hit):
        outcome.exit_code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    outcome.killed_leftovers = leftovers
    outcome.duration = clock.elapsed()
    return outcome

