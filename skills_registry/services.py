"""Writes of the skill registry: sync, imports, staff governance.

* :func:`skills_sync` records what discovery finds (idempotent; the
  ``skills_sync`` command and the start-up hook call it).
* :func:`skill_import_zip` / :func:`skill_import_folder` check a ZIP or a
  local folder completely in memory, validate its ``SKILL.md``, and only
  then write it under the managed folder and sync. A refused import writes
  nothing at all.
* :func:`skills_set_disabled`, :func:`skills_set_subagent_access`,
  :func:`skills_set_privilege` are the staff switches (admin actions).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.services import record
from skills_registry import conf
from skills_registry.confinement import ConfinementError, read_confined
from skills_registry.diagnostics import Diagnostic
from skills_registry.discovery import (
    IMPORTS_DIR,
    SCOPES,
    DiscoveredSkill,
    SkillRoot,
    discover_skills,
)
from skills_registry.frontmatter import NAME_RE, parse_skill_text
from skills_registry.import_bundles import (
    ENTRY_FILE,
    SkillBundle,
    SkillImportError,
    bundle_from_folder,
    bundle_from_zip,
)
from skills_registry.models import SkillResource, SkillVersion, path_key_for
from toolcatalog import catalog_version

logger = logging.getLogger(__name__)

# Fields a sync owns (staff fields are never touched by a sync).
_MATERIAL_FIELDS = (
    "name",
    "description",
    "scope",
    "source",
    "source_info",
    "version",
    "fingerprint",
    "entry_file",
    "base_dir",
    "is_folder",
    "status",
    "diagnostics",
    "metadata",
    "files",
    "file_count",
    "total_bytes",
    "disable_model_invocation",
)


@dataclass(slots=True)
class SyncReport:
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    invalid: int = 0
    shadowed: int = 0
    new_versions: list[str] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"added={len(self.added)} changed={len(self.changed)} removed={len(self.removed)} "
            f"unchanged={self.unchanged} invalid={self.invalid} shadowed={self.shadowed}"
        )


def _actor_name(actor: Any) -> str:
    if actor is None:
        return "system"
    return getattr(actor, "get_username", lambda: str(actor))()


def _row_values(skill: DiscoveredSkill) -> dict[str, Any]:
    return {
        "name": skill.name[:255],
        "description": skill.description,
        "scope": skill.scope,
        "source": skill.source,
        "source_info": skill.source_info,
        "version": skill.version,
        "fingerprint": skill.contents.fingerprint,
        "entry_file": os.fspath(skill.entry_file),
        "base_dir": os.fspath(skill.base_dir),
        "is_folder": skill.is_folder,
        "status": skill.status,
        "diagnostics": [d.to_dict() for d in skill.diagnostics],
        "metadata": skill.parsed.metadata,
        "files": skill.contents.listing(),
        "file_count": len(skill.contents.files),
        "total_bytes": skill.contents.total_bytes,
        "disable_model_invocation": skill.disable_model_invocation,
    }


def _entry_text(row: SkillResource) -> str:
    try:
        return read_confined(row.base_dir, os.path.basename(row.entry_file), max_bytes=conf.max_entry_bytes()).decode("utf-8", "replace")
    except (ConfinementError, OSError):
        return ""  # unreadable now (changed meanwhile): the next sync records the next version


def _record_version(row: SkillResource) -> None:
    SkillVersion.objects.create(
        skill=row,
        revision=row.revision,
        fingerprint=row.fingerprint,
        version=row.version,
        description=row.description,
        files=row.files,
        skill_md=_entry_text(row),
    )


def _apply(result_skills: list[DiscoveredSkill], report: SyncReport) -> None:
    now = timezone.now()
    existing = {row.path_key: row for row in SkillResource.objects.select_for_update().all()}
    seen: set[str] = set()
    for skill in result_skills:
        values = _row_values(skill)
        key = path_key_for(values["entry_file"])
        seen.add(key)
        row = existing.get(key)
        if row is None:
            row = SkillResource.objects.create(
                path_key=key, discovery_order=skill.order, last_seen_at=now, revision=1, **values
            )
            _record_version(row)
            report.added.append(row.name)
            report.new_versions.append(f"{row.name} r1")
            continue
        came_back = row.status == SkillResource.Status.MISSING
        differs = [f for f in _MATERIAL_FIELDS if getattr(row, f) != values[f]]
        new_fingerprint = row.fingerprint != values["fingerprint"]
        if not differs and row.discovery_order == skill.order:
            report.unchanged += 1
            continue
        for name, value in values.items():
            setattr(row, name, value)
        row.discovery_order = skill.order
        row.last_seen_at = now
        if new_fingerprint:
            row.revision += 1
        row.save()
        if new_fingerprint:
            _record_version(row)
            report.new_versions.append(f"{row.name} r{row.revision}")
        if came_back:
            report.added.append(row.name)
        elif differs:
            report.changed.append(row.name)
        else:
            report.unchanged += 1  # only its position moved
    for key, row in existing.items():
        if key in seen or row.status == SkillResource.Status.MISSING:
            continue
        row.status = SkillResource.Status.MISSING
        row.last_seen_at = row.last_seen_at or now
        row.save(update_fields=["status", "updated_at"])
        report.removed.append(row.name)


def skills_sync(
    *,
    actor: Any = None,
    cwd: Path | None = None,
    home: Path | None = None,
    roots: list[SkillRoot] | None = None,
    mode: str | None = None,
    audit: bool = True,
) -> SyncReport:
    """Discover every skill and record it; a second run with nothing changed changes nothing.
    A sync a person asked for (``actor``) that changed rows leaves a ``skill.sync`` audit row
    naming them, in the same transaction (``audit=False``: the import or removal that ran it
    records its own)."""
    roots = roots if roots is not None else conf.configured_roots(cwd=cwd, home=home)
    result = discover_skills(roots, mode=mode or conf.validation_mode(), max_entry_bytes=conf.max_entry_bytes())
    report = SyncReport()
    for attempt in range(3):
        report = SyncReport()
        try:
            with transaction.atomic():
                _apply(result.skills, report)
                if audit and actor is not None and (report.added or report.changed or report.removed):
                    record(
                        actor=actor, action="skill.sync", target=("skills_registry.skillresource", "registry", "the skill registry"),
                        after={"added": report.added, "changed": report.changed, "removed": report.removed},
                    )  # fmt: skip
            break
        except IntegrityError:  # another sync created the same row first
            if attempt == 2:
                raise
    report.invalid = sum(1 for s in result.skills if s.status == "invalid")
    report.shadowed = sum(1 for s in result.skills if s.status == "shadowed")
    report.diagnostics = result.all_diagnostics()
    logger.info("skills sync by %s: %s", _actor_name(actor), report.summary())
    return report


def skills_startup_sync() -> SyncReport | None:
    """The start-up hook: sync, log the outcome, never stop the server."""
    try:
        report = skills_sync()
    except Exception:  # noqa: BLE001 - a broken skill root must not keep Neta from starting
        logger.exception("skills sync at start-up failed")
        return None
    for diag in report.diagnostics:
        if diag.severity == "error" or diag.code in ("collision", "root-missing"):
            logger.warning("skill %s: %s (%s)", diag.path, diag.message, diag.code)
    return report


# --- imports -----------------------------------------------------------------------


@dataclass(slots=True)
class ImportOutcome:
    skill: SkillResource
    target: Path
    replaced: bool
    sync: SyncReport


def _validated_name(bundle: SkillBundle) -> str:
    """The skill's folder name after validating its SKILL.md; refuses invalid skills."""
    mode = conf.validation_mode()
    data = bundle.files[ENTRY_FILE]
    if len(data) > conf.max_entry_bytes():
        raise SkillImportError(f"{ENTRY_FILE} has {len(data)} bytes; the limit is {conf.max_entry_bytes()}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillImportError(f"{ENTRY_FILE} is not valid UTF-8 (byte {exc.start})") from None
    folder = bundle.folder_name
    if not folder:
        # SKILL.md at the top of the archive: the folder is named after the skill.
        probe = parse_skill_text(text, parent_dir_name="", path=ENTRY_FILE, mode=mode)
        folder = probe.name if isinstance(probe.name, str) else ""
    if not folder or not NAME_RE.match(folder) or len(folder) > 64:
        raise SkillImportError(
            f"the skill's name {folder!r} is not a valid skill name (a-z, 0-9 and '-', at most 64 characters)"
        )
    parsed = parse_skill_text(text, parent_dir_name=folder, path=f"{folder}/{ENTRY_FILE}", mode=mode)
    errors = [d for d in parsed.diagnostics if d.severity == "error"]
    if errors:
        raise SkillImportError(
            f"{ENTRY_FILE} is invalid: " + "; ".join(f"{d.message} [{d.code}]" for d in errors)
        )
    return folder


@contextlib.contextmanager
def _managed_lock(managed: Path):
    managed.mkdir(parents=True, exist_ok=True)
    fd = os.open(managed / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _write_new_file(path: Path, content: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(content)


def _write_bundle(bundle: SkillBundle, staging_skill: Path) -> None:
    staging_skill.mkdir(mode=0o755)
    for rel in sorted(bundle.dirs):
        (staging_skill / rel).mkdir(mode=0o755, parents=True, exist_ok=True)
    for rel, content in sorted(bundle.files.items()):
        target = staging_skill / rel
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        _write_new_file(target, content)


def _import_bundle(bundle: SkillBundle, *, scope: str, actor: Any, replace: bool) -> ImportOutcome:
    if scope not in SCOPES:
        raise SkillImportError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    name = _validated_name(bundle)
    managed = conf.managed_dir()
    scope_dir = managed / scope
    target = scope_dir / name
    if not replace and os.path.lexists(target):
        raise SkillImportError(f"a skill {name!r} is already imported in the {scope} scope; pass replace to overwrite")
    # Everything is checked; from here on we write, and only under the managed folder.
    with _managed_lock(managed):
        replaced = os.path.lexists(target)
        if replaced and not replace:
            raise SkillImportError(f"a skill {name!r} was imported in the {scope} scope meanwhile")
        staging = managed / ".staging" / uuid.uuid4().hex
        staging.mkdir(parents=True)
        try:
            _write_bundle(bundle, staging / name)
            imported = {
                "source": bundle.source,
                "imported_by": _actor_name(actor),
                "imported_at": timezone.now().isoformat(),
                "original": bundle.original_name,
            }
            if bundle.sha256:
                imported["archive_sha256"] = bundle.sha256
            (scope_dir / IMPORTS_DIR).mkdir(parents=True, exist_ok=True)
            record_tmp = staging / "record.json"
            _write_new_file(record_tmp, json.dumps(imported, indent=2).encode())
            old = staging / "old"
            if replaced:
                os.rename(target, old)
            try:
                os.rename(staging / name, target)
            except OSError:
                if replaced:
                    os.rename(old, target)  # put the previous version back
                raise
            os.replace(record_tmp, scope_dir / IMPORTS_DIR / f"{name}.json")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    report = skills_sync(actor=actor, audit=False)
    row = SkillResource.objects.get(path_key=path_key_for(os.fspath(target / ENTRY_FILE)))
    with transaction.atomic():
        record(
            actor=actor, action="skill.import", target=row,
            after={"name": name, "scope": scope, "source": bundle.source, "replaced": replaced, "fingerprint": row.fingerprint, "path": os.fspath(target)},
        )  # fmt: skip
    return ImportOutcome(skill=row, target=target, replaced=replaced, sync=report)


def skill_import_zip(
    *,
    archive: str | os.PathLike | BinaryIO,
    scope: str = "workspace",
    actor: Any = None,
    replace: bool = False,
    original_name: str = "",
) -> ImportOutcome:
    """Import a skill from a ZIP archive into ``<managed>/<scope>/<name>``."""
    bundle = bundle_from_zip(archive, limits=conf.import_limits(), original_name=original_name)
    return _import_bundle(bundle, scope=scope, actor=actor, replace=replace)


def skill_import_folder(
    *, folder: str | os.PathLike, scope: str = "workspace", actor: Any = None, replace: bool = False
) -> ImportOutcome:
    """Copy a local skill folder into ``<managed>/<scope>/<name>`` (symlinks refused)."""
    managed = os.path.realpath(conf.managed_dir())
    real = os.path.realpath(folder)
    if real == managed or real.startswith(managed + os.sep):
        raise SkillImportError(f"{folder} is already inside the managed skills folder")
    bundle = bundle_from_folder(folder, limits=conf.import_limits())
    return _import_bundle(bundle, scope=scope, actor=actor, replace=replace)


def skill_import_remove(*, skill: SkillResource, actor: Any = None) -> SyncReport:
    """Delete an imported skill's managed folder and record, then sync (it becomes ``missing``)."""
    if skill.source not in (SkillResource.Source.ZIP, SkillResource.Source.FOLDER_IMPORT):
        raise SkillImportError(f"{skill.name!r} was not imported; only imported skills can be removed here")
    managed = Path(os.path.realpath(conf.managed_dir()))
    base = Path(os.path.realpath(skill.base_dir))
    if base.parent.parent != managed or base.parent.name not in SCOPES:
        raise SkillImportError(f"{skill.base_dir} is not a managed skill folder")
    with _managed_lock(managed):
        shutil.rmtree(base)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(base.parent / IMPORTS_DIR / f"{base.name}.json")
    logger.info("skill %s removed by %s", skill.name, _actor_name(actor))
    report = skills_sync(actor=actor, audit=False)
    with transaction.atomic():
        record(actor=actor, action="skill.remove", target=skill, before={"name": skill.name, "scope": skill.scope, "source": skill.source, "base_dir": skill.base_dir})
    return report


# --- staff switches ------------------------------------------------------------------


def _set_flag(skills, *, field_name: str, value: bool, actor: Any) -> int:
    ids = [s.pk for s in skills]
    user = actor if getattr(actor, "pk", None) is not None else None
    with transaction.atomic():
        rows = list(SkillResource.objects.select_for_update().filter(pk__in=ids).values("pk", "name", "scope", field_name))
        count = SkillResource.objects.filter(pk__in=ids).update(
            **{field_name: value}, changed_by=user, updated_at=timezone.now()
        )
        for row in rows:  # one audit row per skill, also when a bulk action set many
            if row[field_name] != value:
                record(
                    actor=actor, action=f"skill.set_{field_name}", target=(SkillResource._meta.label_lower, row["pk"], f"{row['name']} ({row['scope']})"),
                    before={field_name: row[field_name]}, after={field_name: value},
                )  # fmt: skip
        catalog_version.bump()  # a bulk update sends no signal
    logger.info("skills %s: %s=%s by %s", ids, field_name, value, _actor_name(actor))
    return count


def skills_set_disabled(*, skills, disabled: bool, actor: Any) -> int:
    """Disable (or re-enable) skills: a disabled skill is offered to no agent."""
    return _set_flag(skills, field_name="disabled", value=disabled, actor=actor)


def skills_set_subagent_access(*, skills, allowed: bool, actor: Any) -> int:
    """Allow or deny skills in subagents (the agent's whitelist must still name them)."""
    return _set_flag(skills, field_name="allow_in_subagent", value=allowed, actor=actor)


def skills_set_privilege(*, skills, requires_privilege: bool, actor: Any) -> int:
    """Mark skills as privileged: never offered to subagents."""
    return _set_flag(skills, field_name="requires_privilege", value=requires_privilege, actor=actor)
