"""read_confined: the skill folder is a hard boundary, also against a symlink swapped mid-call."""

from __future__ import annotations

import os
import threading

import pytest

from skills_registry.confinement import (
    ConfinementError,
    open_confined,
    read_confined,
    resolve_confined,
)


@pytest.fixture
def skill(tmp_path):
    base = tmp_path / "skill"
    (base / "scripts").mkdir(parents=True)
    (base / "scripts" / "run.sh").write_text("echo inside\n")
    (base / "SKILL.md").write_text("---\ndescription: d\n---\n")
    (tmp_path / "secret.txt").write_text("TOP SECRET")
    (tmp_path / "outside-dir").mkdir()
    (tmp_path / "outside-dir" / "f.txt").write_text("TOP SECRET")
    return base


def test_reads_a_plain_file(skill):
    assert read_confined(skill, "scripts/run.sh", max_bytes=1000) == b"echo inside\n"
    assert read_confined(skill, "./scripts//run.sh", max_bytes=1000) == b"echo inside\n"


def test_internal_symlink_is_fine(skill):
    os.symlink("scripts/run.sh", skill / "alias.sh")
    assert read_confined(skill, "alias.sh", max_bytes=1000) == b"echo inside\n"


@pytest.mark.parametrize(
    "path, fragment",
    [
        ("../secret.txt", "'..'"),
        ("scripts/../../secret.txt", "'..'"),
        ("scripts/..", "'..'"),
        ("/etc/passwd", "absolute"),
        ("scripts\\run.sh", "backslash"),
        ("scripts/run.sh\x00.txt", "NUL"),
        ("", "empty"),
        (".", "folder itself"),
        ("scripts", "regular file"),
        ("nope.txt", "no such file"),
    ],
)
def test_refusals(skill, path, fragment):
    with pytest.raises(ConfinementError) as info:
        read_confined(skill, path, max_bytes=1000)
    assert fragment in str(info.value)


def test_symlink_leading_out_is_refused(skill, tmp_path):
    os.symlink(tmp_path / "secret.txt", skill / "leak.txt")
    os.symlink(tmp_path / "outside-dir", skill / "leak-dir")
    os.symlink("../secret.txt", skill / "relative-leak")
    for path in ("leak.txt", "leak-dir/f.txt", "relative-leak"):
        with pytest.raises(ConfinementError, match="outside the skill folder"):
            read_confined(skill, path, max_bytes=1000)


def test_fifo_and_devices_are_not_opened(skill):
    os.mkfifo(skill / "pipe")
    with pytest.raises(ConfinementError, match="regular file"):
        read_confined(skill, "pipe", max_bytes=1000)  # would block forever if opened for reading
    os.symlink("/dev/zero", skill / "zero")
    with pytest.raises(ConfinementError):
        read_confined(skill, "zero", max_bytes=1000)


def test_size_cap(skill):
    (skill / "big.txt").write_bytes(b"x" * 2001)
    with pytest.raises(ConfinementError, match="2001 bytes; the limit is 2000"):
        read_confined(skill, "big.txt", max_bytes=2000)
    assert len(read_confined(skill, "big.txt", max_bytes=2001)) == 2001


def test_swap_between_check_and_open_is_refused(skill, tmp_path):
    """Deterministic: the file is checked, then replaced by a symlink to outside, then opened."""
    base_real, segments = resolve_confined(skill, "scripts/run.sh")
    os.unlink(skill / "scripts" / "run.sh")
    os.symlink(tmp_path / "secret.txt", skill / "scripts" / "run.sh")
    with pytest.raises(ConfinementError, match="symlink appeared"):
        open_confined(base_real, segments)
    # the same with a folder on the way swapped for a symlink to an outside folder
    (skill / "scripts" / "run.sh").unlink()
    (skill / "scripts" / "run.sh").write_text("echo inside\n")
    base_real, segments = resolve_confined(skill, "scripts/run.sh")
    os.rename(skill / "scripts", skill / "scripts.real")
    (tmp_path / "outside-dir" / "run.sh").write_text("TOP SECRET")
    os.symlink(tmp_path / "outside-dir", skill / "scripts")
    with pytest.raises(ConfinementError, match="symlink appeared"):
        open_confined(base_real, segments)


def test_swapping_symlink_race_never_leaks(skill, tmp_path):
    """A thread keeps swapping a file and a symlink to outside while reads run."""
    target = skill / "flip.txt"
    target.write_text("inside")
    stop = threading.Event()

    def flipper():
        secret = tmp_path / "secret.txt"
        while not stop.is_set():
            tmp_link = skill / ".flip-link"
            tmp_file = skill / ".flip-file"
            try:
                os.symlink(secret, tmp_link)
                os.replace(tmp_link, target)
                tmp_file.write_text("inside")
                os.replace(tmp_file, target)
            except OSError:
                pass

    thread = threading.Thread(target=flipper)
    thread.start()
    outcomes = {"inside": 0, "refused": 0}
    try:
        for _ in range(3000):
            try:
                data = read_confined(skill, "flip.txt", max_bytes=1000)
            except ConfinementError:
                outcomes["refused"] += 1
                continue
            assert data == b"inside", data  # never the secret
            outcomes["inside"] += 1
    finally:
        stop.set()
        thread.join()
    assert outcomes["inside"] + outcomes["refused"] == 3000
