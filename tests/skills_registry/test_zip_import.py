"""ZIP and folder imports: a corpus of hostile archives, each refused with nothing written.

Archives are built byte by byte (``raw_zip``) so every header field can lie.
For every refusal the whole temporary tree (project, home, managed folder,
archives) is compared before and after: not one file appears anywhere, and the
managed folder is not even created.
"""

from __future__ import annotations

import io
import os
import stat
import zipfile
import zlib
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from skills_registry.import_bundles import SkillImportError
from skills_registry.models import SkillResource
from skills_registry.services import (
    skill_import_folder,
    skill_import_remove,
    skill_import_zip,
)
from tests.support.skills import GOOD_MD, MiB, deflate, entry, good, raw_zip, tree_snapshot, write_skill

pytestmark = pytest.mark.django_db


def deflate_zeros(n: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = b"\0" * MiB
    out = []
    while n > 0:
        out.append(c.compress(chunk[: min(n, MiB)]))
        n -= MiB
    out.append(c.flush())
    return b"".join(out)


def crc_zeros(n: int) -> int:
    crc = 0
    chunk = b"\0" * MiB
    while n > 0:
        crc = zlib.crc32(chunk[: min(n, MiB)], crc)
        n -= MiB
    return crc


def many_files(n: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("good/SKILL.md", GOOD_MD)
        for i in range(n):
            zf.writestr(f"good/f/{i}.txt", "x")
    return buf.getvalue()


def corpus(tmp_path: Path) -> list[tuple[str, bytes, str]]:
    abs_target = str(tmp_path / "pwned-abs.txt")
    kib_of_gib = deflate_zeros(MiB)  # ~1 KiB of data
    cases = [
        # zip-slip variants
        ("dotdot", raw_zip(good(entry("../evil.txt"))), "'..' segment"),
        ("dotdot-deep", raw_zip(good(entry("good/../../evil.txt"))), "'..' segment"),
        ("dotdot-only-folder", raw_zip(good(entry("good/sub/../../..", b""))), "'..' segment"),
        ("dotdot-dir-entry", raw_zip(good(entry("good/../", b"", attr=(stat.S_IFDIR | 0o755) << 16))), "'..' segment"),
        ("dot-segment", raw_zip(good(entry("good/./../evil.txt"))), "'..' segment"),
        ("backslash-dotdot", raw_zip(good(entry("..\\evil.txt"))), "backslash"),
        ("backslash-deep", raw_zip(good(entry("good\\..\\..\\evil.txt"))), "backslash"),
        ("empty-segment", raw_zip(good(entry("good//evil.txt"))), "empty or '.' path segment"),
        # absolute names
        ("absolute", raw_zip(good(entry(abs_target))), "absolute path"),
        ("absolute-skill-md", raw_zip([entry("/good/SKILL.md", GOOD_MD)]), "absolute path"),
        ("drive-letter", raw_zip(good(entry("C:/evil.txt"))), "absolute path"),
        ("drive-letter-backslash", raw_zip(good(entry("C:\\evil.txt"))), "backslash"),
        ("unc", raw_zip(good(entry("\\\\server\\share\\evil.txt"))), "backslash"),
        # special files
        ("symlink-out", raw_zip(good(entry("good/link", b"/etc/passwd", attr=(stat.S_IFLNK | 0o777) << 16))), "a symlink"),
        ("symlink-up", raw_zip(good(entry("good/up", b"../../..", attr=(stat.S_IFLNK | 0o777) << 16))), "a symlink"),
        ("symlink-inside", raw_zip(good(entry("good/alias.md", b"SKILL.md", attr=(stat.S_IFLNK | 0o777) << 16))), "a symlink"),
        ("symlink-as-skill-md", raw_zip([entry("good/SKILL.md", b"/etc/passwd", attr=(stat.S_IFLNK | 0o777) << 16)]), "a symlink"),
        ("char-device", raw_zip(good(entry("good/tty", b"", attr=(stat.S_IFCHR | 0o666) << 16))), "a character device"),
        ("block-device", raw_zip(good(entry("good/sda", b"", attr=(stat.S_IFBLK | 0o660) << 16))), "a block device"),
        ("fifo", raw_zip(good(entry("good/pipe", b"", attr=(stat.S_IFIFO | 0o644) << 16))), "a FIFO"),
        ("socket", raw_zip(good(entry("good/sock", b"", attr=(stat.S_IFSOCK | 0o644) << 16))), "a socket"),
        # names
        ("nul-in-name", raw_zip(good(entry(b"good/evil\x00.txt"))), "NUL character"),
        ("nul-hides-traversal", raw_zip(good(entry(b"good/ok.txt\x00/../../evil"))), "NUL character"),
        ("control-char", raw_zip(good(entry("good/evil\n.txt"))), "control character"),
        ("empty-name", raw_zip(good(entry(""))), "empty name"),
        ("long-segment", raw_zip(good(entry("good/" + "a" * 300))), "longer than 255 bytes"),
        ("too-deep", raw_zip(good(entry("good/" + "d/" * 40 + "f.txt"))), "nested deeper"),
        ("duplicate", raw_zip(good(entry("good/SKILL.md", GOOD_MD))), "more than once"),
        ("file-and-folder", raw_zip(good(entry("good/a"), entry("good/a/b"))), "both a file and a folder"),
        # sizes and bombs
        ("ten-thousand-files", many_files(10_000), "the limit is 1000"),
        ("1KiB-declares-1GiB", raw_zip(good(entry("good/bomb.bin", comp=kib_of_gib, usize=1024 * MiB, crc=crc_zeros(MiB)))), "would unpack to more than"),
        ("real-ratio-bomb", raw_zip(good(entry("good/zeros.bin", b"\0" * (8 * MiB)))), "compression bomb"),
        (
            "thousand-1KiB-entries-declare-1GiB",
            raw_zip([entry("good/SKILL.md", GOOD_MD)] + [entry(f"good/o{i}.bin", comp=kib_of_gib, usize=MiB, crc=crc_zeros(MiB)) for i in range(999)]),
            "would unpack to more than",
        ),
        (
            "overlapping-1KiB-as-1GiB",
            raw_zip([entry("good/SKILL.md", comp=kib_of_gib, usize=MiB, crc=crc_zeros(MiB))] + [entry(f"good/o{i}.bin", comp=kib_of_gib, usize=MiB, crc=crc_zeros(MiB)) for i in range(999)], share_first_local=True),
            "would unpack to more than",
        ),
        (
            "overlapping-entries",
            raw_zip([entry("good/SKILL.md", GOOD_MD)] + [entry("good/SKILL.md".replace("SKILL", f"C{i:03d}"), GOOD_MD) for i in range(5)], share_first_local=True),
            "overlap",
        ),
        ("size-lies-small", raw_zip(good(entry("good/x.bin", comp=deflate(b"y" * 100_000), usize=10, crc=zlib.crc32(b"y" * 10), csize=None))), "sizes lie"),
        ("crc-mismatch", raw_zip(good(entry("good/x.txt", b"hello", crc=12345))), "corrupt"),
        ("stored-size-lie", raw_zip(good(entry("good/x.txt", b"hello world", method=0, usize=5, crc=zlib.crc32(b"hello")))), "sizes lie"),
        # other refusals
        ("encrypted", raw_zip(good(entry("good/secret.txt", b"x", flags=0x1))), "encrypted"),
        ("bzip2-method", raw_zip(good(entry("good/x.txt", b"x", method=12, comp=b"BZh9"))), "compression method 12"),
        ("not-a-zip", b"this is not a zip archive at all" * 10, "not a valid ZIP"),
        ("truncated", raw_zip(good(entry("good/x.txt", b"x" * 100)))[:-30], "not a valid ZIP"),
        ("no-skill-md", raw_zip([entry("good/README.md", b"hi")]), "must hold one skill"),
        ("two-skills", raw_zip([entry("a/SKILL.md", GOOD_MD), entry("b/SKILL.md", GOOD_MD)]), "must hold one skill"),
        ("invalid-skill", raw_zip([entry("Bad_Name/SKILL.md", b"---\ndescription: d\n---\n")]), "not a valid skill name"),
        ("folder-name-mismatch", raw_zip([entry("other/SKILL.md", GOOD_MD)]), "name-mismatch"),
        ("no-description", raw_zip([entry("good/SKILL.md", b"---\nname: good\n---\n")]), "description-missing"),
        ("skill-md-not-utf8", raw_zip([entry("good/SKILL.md", b"---\nname: good\ndescription: \xff\n---\n")]), "not valid UTF-8"),
    ]
    return cases


def test_corpus_is_big_enough(tmp_path):
    assert len(corpus(tmp_path)) >= 30


@pytest.fixture
def hostile(skill_env):
    cases = corpus(skill_env.tmp)
    archives = skill_env.tmp / "archives"
    archives.mkdir()
    paths = {}
    for case_id, data, _ in cases:
        paths[case_id] = archives / f"{case_id}.zip"
        paths[case_id].write_bytes(data)
    return skill_env, cases, paths


def test_every_hostile_archive_is_refused_and_nothing_is_written(hostile, staff):
    env, cases, paths = hostile
    before = tree_snapshot(env.tmp)
    failures = []
    for case_id, _data, fragment in cases:
        try:
            skill_import_zip(archive=paths[case_id], scope="workspace", actor=staff)
        except SkillImportError as exc:
            if fragment not in str(exc):
                failures.append(f"{case_id}: refused, but with {exc!r} (expected {fragment!r})")
        else:
            failures.append(f"{case_id}: was accepted")
        if tree_snapshot(env.tmp) != before:
            failures.append(f"{case_id}: something was written")
    assert failures == []
    assert not env.managed.exists()
    assert not (env.tmp / "pwned-abs.txt").exists()
    assert SkillResource.objects.count() == 0


def test_refusal_after_a_good_import_leaves_managed_folder_untouched(hostile, staff):
    env, cases, paths = hostile
    good_zip = env.tmp / "good.zip"
    good_zip.write_bytes(raw_zip(good(entry("good/ref.md", b"ref"))))
    skill_import_zip(archive=good_zip, actor=staff)
    before = tree_snapshot(env.tmp)
    for case_id, _data, _fragment in cases:
        with pytest.raises(SkillImportError):
            skill_import_zip(archive=paths[case_id], actor=staff, replace=True)
    with pytest.raises(SkillImportError, match="already imported"):
        skill_import_zip(archive=good_zip, actor=staff)
    assert tree_snapshot(env.tmp) == before


def test_configured_limits(skill_env, settings, staff):
    settings.NETA_SKILL_IMPORT_MAX_BYTES = MiB
    settings.NETA_SKILL_IMPORT_MAX_FILES = 3
    archive = skill_env.tmp / "a.zip"
    archive.write_bytes(raw_zip(good(entry("good/r1.bin", os.urandom(600 * 1024)), entry("good/r2.bin", os.urandom(600 * 1024)))))
    with pytest.raises(SkillImportError, match="would unpack to more than 1.0 MiB"):
        skill_import_zip(archive=archive, actor=staff)
    archive.write_bytes(raw_zip(good(*[entry(f"good/{i}.txt") for i in range(3)])))
    with pytest.raises(SkillImportError, match="has 4 entries; the limit is 3"):
        skill_import_zip(archive=archive, actor=staff)
    assert not skill_env.managed.exists()


def test_good_zip_lands_in_managed_folder_and_registry(skill_env, staff):
    archive = skill_env.tmp / "upload.zip"
    archive.write_bytes(raw_zip(good(entry("good/scripts/run.sh", b"echo hi\n"), entry("__MACOSX/good/._SKILL.md", b"junk"))))
    outcome = skill_import_zip(archive=archive, scope="user", actor=staff)
    target = skill_env.managed / "user" / "good"
    assert outcome.target == target and not outcome.replaced
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*")) == ["SKILL.md", "scripts", "scripts/run.sh"]
    assert (target / "SKILL.md").read_bytes() == GOOD_MD
    row = outcome.skill
    assert (row.name, row.scope, row.source, row.status) == ("good", "user", "zip", "active")
    assert row.source_info["imported_by"] == "staff"
    assert row.source_info["original"] == "upload.zip" and len(row.source_info["archive_sha256"]) == 64
    assert row.source_info["imported_at"]
    # everything written is inside the managed folder
    outside = {k for k in tree_snapshot(skill_env.tmp) if not k.startswith("managed")}
    assert outside == {"project", "project/.git", "home", "workspace-skills", "upload.zip"}


def test_skill_md_at_archive_top_and_replace(skill_env, staff):
    archive = skill_env.tmp / "flat.zip"
    archive.write_bytes(raw_zip([entry("SKILL.md", GOOD_MD), entry("notes.txt", b"v1")]))
    first = skill_import_zip(archive=archive, actor=staff)
    assert first.target == skill_env.managed / "workspace" / "good"
    archive.write_bytes(raw_zip([entry("SKILL.md", GOOD_MD), entry("notes.txt", b"v2")]))
    second = skill_import_zip(archive=archive, actor=staff, replace=True)
    assert second.replaced and (second.target / "notes.txt").read_text() == "v2"
    assert second.skill.pk == first.skill.pk and second.skill.revision == 2
    assert not (skill_env.managed / ".staging").exists() or not any((skill_env.managed / ".staging").iterdir())


def test_folder_import_copies_and_refuses_symlinks(skill_env, staff):
    src = write_skill(skill_env.tmp / "src", "folder-skill", files={"a/b.txt": "b"}).parent
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref")
    outcome = skill_import_folder(folder=src, scope="project", actor=staff)
    assert outcome.skill.source == "folder-import" and outcome.skill.scope == "project"
    assert (outcome.target / "a" / "b.txt").read_text() == "b"
    assert not (outcome.target / ".git").exists()
    assert outcome.skill.source_info["original"] == str(src)
    bad = write_skill(skill_env.tmp / "src2", "linky").parent
    os.symlink("/etc/passwd", bad / "passwd")
    before = tree_snapshot(skill_env.tmp)
    with pytest.raises(SkillImportError, match="a symlink"):
        skill_import_folder(folder=bad, actor=staff)
    fifo = write_skill(skill_env.tmp / "src3", "fifo").parent
    os.mkfifo(fifo / "pipe")
    before = tree_snapshot(skill_env.tmp)
    with pytest.raises(SkillImportError, match="a FIFO"):
        skill_import_folder(folder=fifo, actor=staff)
    assert tree_snapshot(skill_env.tmp) == before
    with pytest.raises(SkillImportError, match="already inside the managed"):
        skill_import_folder(folder=outcome.target, actor=staff, replace=True)
    with pytest.raises(SkillImportError, match="scope must be"):
        skill_import_folder(folder=src, scope="global", actor=staff)


def test_remove_imported(skill_env, staff):
    archive = skill_env.tmp / "good.zip"
    archive.write_bytes(raw_zip(good()))
    outcome = skill_import_zip(archive=archive, actor=staff)
    report = skill_import_remove(skill=outcome.skill, actor=staff)
    assert report.removed == ["good"] and not outcome.target.exists()
    write_skill(skill_env.project_skills, "local-one")
    from skills_registry.services import skills_sync

    skills_sync()
    with pytest.raises(SkillImportError, match="was not imported"):
        skill_import_remove(skill=SkillResource.objects.get(name="local-one"), actor=staff)


def test_import_command(skill_env, staff):
    archive = skill_env.tmp / "good.zip"
    archive.write_bytes(raw_zip(good()))
    out = io.StringIO()
    call_command("skills_import", str(archive), "--scope", "user", "--as-user", "staff", stdout=out)
    assert "imported good (user, zip)" in out.getvalue() and "status=active" in out.getvalue()
    bomb = skill_env.tmp / "bomb.zip"
    bomb.write_bytes(raw_zip(good(entry("good/../evil", b"x"))))
    with pytest.raises(CommandError, match="import refused: .*'..' segment"):
        call_command("skills_import", str(bomb))
    with pytest.raises(CommandError, match="does not exist"):
        call_command("skills_import", str(skill_env.tmp / "nope.zip"))
    src = write_skill(skill_env.tmp / "src", "from-folder").parent
    out = io.StringIO()
    call_command("skills_import", str(src), stdout=out)
    assert "imported from-folder (workspace, folder-import)" in out.getvalue()
