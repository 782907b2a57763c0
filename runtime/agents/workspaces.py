"""Where an agent's tools work for one session: the one place that decides (docs/runtime.md).

An agent has a *workspace* (``Agent.working_directory``: its ``cwd`` or
``NETA_WORKSPACE_DIR``) and a ``workspace_mode``:

* ``per_session`` (default): ``<workspace>/sessions/<session id>/``. A session
  branched from another one (``create_branched_session``, same user and agent)
  continues in its parent's directory, as a Pi fork keeps its cwd;
* ``per_user``: ``<workspace>/users/<user id>/`` (sessions without a user:
  ``users/anonymous/``);
* ``shared``: the workspace itself, for every user of the agent — a deliberate
  choice, shown as such in the console.

The directory is created on first use with mode 0700 (its ``sessions``/``users``
parent too); names are checked (letters, digits, ``-``, ``_``) and the result
must stay inside the workspace with no symlink on the way. The tool roots are
that directory plus the agent's extra ``workspace_roots`` that exist — except,
outside ``shared`` mode, a root that overlaps the workspace (it would show every
user's directory), which is dropped with a warning (``Agent.clean`` refuses it).

The turn loop (cwd and roots), the system prompt, the console's agent page and
``session_start`` (which records the directory as the session's Pi ``cwd``)
all resolve it here.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from runtime.models import Agent, WorkspaceMode
from sessions_tree.ids import new_session_id
from sessions_tree.models import AgentSession
from toolcatalog.protected_paths import protected_match, protected_paths, workspace_path_problem

logger = logging.getLogger(__name__)

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
ANONYMOUS = "anonymous"
MAX_BRANCH_HOPS = 32


class WorkspaceError(ValueError):
    """The workspace cannot be used (unsafe name, a symlink on the way, …)."""


@dataclass(frozen=True)
class Workspace:
    mode: str
    base: Path  # the agent's workspace
    cwd: Path  # where this session's tools work
    roots: tuple[Path, ...]  # cwd first

    @property
    def isolated(self) -> bool:
        return self.mode != WorkspaceMode.SHARED


def _safe(name: str, what: str) -> str:
    if not SAFE_NAME.match(name):
        raise WorkspaceError(f"{what} {name!r} cannot name a workspace directory (letters, digits, '-', '_' only)")
    return name


def _overlaps(a: str, b: str) -> bool:
    a, b = a.rstrip("/") or "/", b.rstrip("/") or "/"
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def _workspace_session_id(session: AgentSession) -> str:
    """The session whose directory ``session`` works in: itself, or the branch's origin."""
    current = session
    for _ in range(MAX_BRANCH_HOPS):
        if not current.parent_session_id:
            break
        parent = (
            AgentSession.objects.filter(session_id=current.parent_session_id)
            .only("session_id", "parent_session_id", "user_id", "agent")
            .first()
        )
        if parent is None or parent.user_id != session.user_id or parent.agent != session.agent:
            break
        current = parent
    return current.session_id


def _make_private(path: Path) -> None:
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        return
    os.chmod(path, 0o700)  # whatever the umask


def extra_roots(agent: Agent, base: Path) -> list[Path]:
    """The agent's extra roots that exist; outside shared mode, none that overlaps the workspace."""
    roots = []
    for raw in agent.workspace_roots or []:
        if not isinstance(raw, str) or not os.path.isdir(raw):
            continue
        problem = workspace_path_problem(raw)
        if problem:  # a row stored before the rule (Agent.clean refuses it)
            logger.warning("agent %s: workspace root refused and not used: %s", agent.name, problem)
            continue
        if agent.workspace_mode != WorkspaceMode.SHARED and _overlaps(os.path.realpath(raw), str(base)):
            logger.warning(
                "agent %s: workspace root %s overlaps its workspace %s and would show every user's directory; "
                "it is not used (workspace mode %s)", agent.name, raw, base, agent.workspace_mode,
            )
            continue
        roots.append(Path(raw))
    return roots


def workspace_for(
    agent: Agent,
    session: AgentSession | None = None,
    user=None,
    *,
    session_id: str | None = None,
    create: bool = True,
) -> Workspace:
    """The workspace of ``session`` (or of ``session_id`` / ``user`` before the session exists).

    ``per_user`` uses the session's owner when a session is given (a staff member
    prompting someone's session works in the owner's directory), else ``user``.
    With ``create`` the directories are made (0700) and checked.
    """
    base = Path(os.path.realpath(agent.working_directory))
    problem = workspace_path_problem(str(base))
    if problem:  # a row stored before the rule (Agent.clean refuses it): no tool works there
        raise WorkspaceError(f"agent {agent.name!r}: the workspace is refused: {problem}")
    mode = agent.workspace_mode or WorkspaceMode.PER_SESSION
    if mode == WorkspaceMode.SHARED:
        cwd = base
    elif mode == WorkspaceMode.PER_USER:
        user_id = session.user_id if session is not None else getattr(user, "pk", None)
        cwd = base / "users" / (_safe(str(user_id), "user id") if user_id is not None else ANONYMOUS)
    elif mode == WorkspaceMode.PER_SESSION:
        key = _workspace_session_id(session) if session is not None else session_id
        if not key:
            raise WorkspaceError("a per-session workspace needs a session")
        cwd = base / "sessions" / _safe(key, "session id")
    else:
        raise WorkspaceError(f"unknown workspace mode {mode!r}")
    if create:
        base.mkdir(parents=True, exist_ok=True)
        if cwd != base:
            _make_private(cwd.parent)
            _make_private(cwd)
        if os.path.realpath(cwd) != str(cwd):  # a symlink planted on the way (e.g. by a shared agent)
            raise WorkspaceError(f"workspace {cwd} is not a plain directory inside {base} (a symlink on the way?)")
    return Workspace(mode=mode, base=base, cwd=cwd, roots=(cwd, *extra_roots(agent, base)))


def delete_session_directories(session: AgentSession) -> list[Path]:
    """Remove ``<workspace>/sessions/<id>/`` of a deleted session in every agent's workspace.

    A deleted id is free again (an import keeps a header id nobody holds), so a
    directory left behind would hand its files to whoever imports a file with that id.
    Every agent's workspace is looked at (the session may have been handed from one
    agent to another); only the directory named by this session's id is touched.

    Forks of the session (same user and agent) worked in its directory and, once it is
    gone, resolve to their own: the directory is handed to the oldest of them (renamed
    to ``sessions/<fork id>/``), so their files stay theirs and nothing is left under
    the freed id. Returns the directories removed or handed over; a failure is logged,
    never raised (the session is already deleted)."""
    if not SAFE_NAME.match(session.session_id):
        return []
    bases = {os.path.realpath(settings.NETA_WORKSPACE_DIR)}
    bases.update(os.path.realpath(agent.working_directory) for agent in Agent.objects.only("cwd"))
    heir = (
        AgentSession.objects.filter(parent_session_id=session.session_id, user_id=session.user_id, agent=session.agent)
        .order_by("created_at", "pk")
        .values_list("session_id", flat=True)
        .first()
    )
    removed = []
    for base in sorted(bases):
        path = Path(base) / "sessions" / session.session_id
        try:
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode) and heir and SAFE_NAME.match(heir) and not os.path.lexists(path.with_name(heir)):
                os.rename(path, path.with_name(heir))  # the fork that worked here keeps its files
                logger.info("workspace %s of deleted session %s handed to its fork %s", path, session.session_id, heir)
            elif stat.S_ISDIR(st.st_mode):
                shutil.rmtree(path)  # does not follow symlinks inside
            else:  # a symlink planted there is removed, never followed
                os.unlink(path)
        except FileNotFoundError:
            continue
        except OSError:
            logger.exception("could not remove the directory %s of deleted session %s", path, session.session_id)
            continue
        removed.append(path)
    return removed


def new_session_workspace(agent: Agent, user=None) -> tuple[str, Path]:
    """A session id and the directory that session will work in (its Pi ``cwd``), not yet created."""
    session_id = new_session_id()
    return session_id, workspace_for(agent, user=user, session_id=session_id, create=False).cwd


def workspace_layout(agent: Agent) -> str:
    """What the console says about an agent's workspace."""
    base = os.path.realpath(agent.working_directory)
    mode = agent.workspace_mode
    if mode == WorkspaceMode.SHARED:
        return f"shared: every user of the agent works in {base}/"
    if mode == WorkspaceMode.PER_USER:
        return f"per user: {base}/users/<user id>/"
    return f"per session: {base}/sessions/<session id>/"


def preview_cwd(agent: Agent) -> str:
    """The cwd a system prompt preview shows (a placeholder for the session or user)."""
    base = os.path.realpath(agent.working_directory)
    return {
        WorkspaceMode.SHARED: base,
        WorkspaceMode.PER_USER: f"{base}/users/<user id>",
    }.get(agent.workspace_mode, f"{base}/sessions/<session id>")


def workspace_conflicts(agent: Agent) -> list[str]:
    """Configuration that would break isolation: problems for ``Agent.clean``."""

    problems: list[str] = []
    base = os.path.realpath(agent.working_directory)
    hit = protected_match(base, protected_paths())
    if hit is not None:
        problems.append(f"the workspace {base} lies in {hit}, which the tools never touch (a server secret or store)")
    for what, path in (("the workspace", agent.working_directory), *(("workspace root", r) for r in agent.workspace_roots or [] if isinstance(r, str))):
        problem = workspace_path_problem(path)
        if problem:
            problems.append(f"{what}: {problem}")
    if agent.workspace_mode != WorkspaceMode.SHARED:
        for raw in agent.workspace_roots or []:
            if isinstance(raw, str) and _overlaps(os.path.realpath(raw), base):
                problems.append(
                    f"workspace root {raw} overlaps the agent's workspace {base}: it would show every "
                    f"{'session' if agent.workspace_mode == WorkspaceMode.PER_SESSION else 'user'}'s directory"
                )
    others = Agent.objects.exclude(pk=agent.pk) if agent.pk else Agent.objects.all()
    for other in others.only("name", "cwd", "workspace_mode", "workspace_roots"):
        if (agent.workspace_mode == WorkspaceMode.SHARED) == (other.workspace_mode == WorkspaceMode.SHARED):
            continue
        shared, isolated = (agent, other) if agent.workspace_mode == WorkspaceMode.SHARED else (other, agent)
        isolated_base = os.path.realpath(isolated.working_directory)
        seen = [os.path.realpath(shared.working_directory)] + [
            os.path.realpath(r) for r in shared.workspace_roots or [] if isinstance(r, str)
        ]
        if any(_overlaps(p, isolated_base) for p in seen):
            problems.append(
                f"agent {other.name!r} ({other.workspace_mode}) shares the workspace {isolated_base}: the shared "
                "agent would see its users' directories; give one of them its own cwd"
            )
    return problems
