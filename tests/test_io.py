"""ema_boundary.io: atomic outputs that never replace what the user made."""

import json
import os

import pytest

from ema_boundary.io import (
    MARKER,
    OutputError,
    atomic_dir,
    atomic_files,
    check_output_dir,
    earlier_attempt,
    output_owner,
)

TOOL = "test-tool"


def _write(target, tool=TOOL, overwrite=False, text="result"):
    with atomic_dir(target, tool=tool, overwrite=overwrite) as tmp:
        (tmp / "out.txt").write_text(text)


def test_a_new_folder_gets_the_result_and_the_marker(tmp_path):
    target = tmp_path / "new"
    _write(target)
    assert (target / "out.txt").read_text() == "result"
    assert output_owner(target) == TOOL
    assert json.loads((target / MARKER).read_text())["tool"] == TOOL


def test_an_empty_existing_folder_is_used(tmp_path):
    target = tmp_path / "empty"
    target.mkdir()
    _write(target)
    assert (target / "out.txt").exists()


def test_a_foreign_file_survives_and_the_folder_is_refused_even_with_overwrite(tmp_path):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "precious.txt").write_text("keep me")
    for overwrite in (False, True):
        with pytest.raises(OutputError, match="not an output of test-tool"):
            _write(target, overwrite=overwrite)
    assert (target / "precious.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no temporary left beside it


def test_own_output_is_replaced_only_with_overwrite(tmp_path):
    target = tmp_path / "run"
    _write(target, text="first")
    with pytest.raises(OutputError, match="--overwrite_output_dir"):
        _write(target, text="second")
    assert (target / "out.txt").read_text() == "first"
    _write(target, overwrite=True, text="second")
    assert (target / "out.txt").read_text() == "second"


def test_another_tools_output_is_refused(tmp_path):
    target = tmp_path / "run"
    _write(target, tool="other-tool")
    with pytest.raises(OutputError, match="holds an output of other-tool"):
        _write(target, overwrite=True)


@pytest.mark.parametrize("name", [".", ".."])
def test_the_working_folder_and_its_parents_are_refused_up_front(tmp_path, monkeypatch, name):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(OutputError, match="working folder or one of its parents"):
        check_output_dir(name, tool=TOOL)


def test_a_repository_root_is_refused(tmp_path):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    with pytest.raises(OutputError, match="repository root"):
        check_output_dir(tmp_path / "repo", tool=TOOL)


def test_files_put_there_during_the_run_survive_and_the_result_is_kept_beside(tmp_path):
    target = tmp_path / "run"
    with pytest.raises(OutputError, match="finished output is in"):
        with atomic_dir(target, tool=TOOL) as tmp:
            (tmp / "out.txt").write_text("result")
            target.mkdir()
            (target / "precious.txt").write_text("keep me")
    assert (target / "precious.txt").read_text() == "keep me"
    assert (tmp_path / "run.failed" / "out.txt").read_text() == "result"


def test_keep_on_error_keeps_the_logs_and_names_them(tmp_path):
    target = tmp_path / "report"
    with pytest.raises(RuntimeError) as info:
        with atomic_dir(target, tool=TOOL, keep_on_error=True) as tmp:
            (tmp / "run.log").write_text("what went wrong")
            raise RuntimeError("stage failed")
    assert info.value.kept_at == tmp_path / "report.failed"
    assert (tmp_path / "report.failed" / "run.log").read_text() == "what went wrong"
    assert not target.exists()


def test_without_keep_on_error_nothing_is_left(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_dir(tmp_path / "x", tool=TOOL):
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_a_long_job_resumes_in_its_own_earlier_attempt_and_never_loses_it(tmp_path):
    target = tmp_path / "out"
    killed = tmp_path / ".out.tmp-abc"  # what a killed run leaves
    (killed / "work").mkdir(parents=True)
    (killed / "work" / "done.txt").write_text("an hour of work")
    # An error (Ctrl-C too) keeps the attempt, renamed to a visible kept name.
    with pytest.raises(KeyboardInterrupt) as err, atomic_dir(target, tool="t", resume=killed) as tmp:
        assert tmp == killed
        raise KeyboardInterrupt
    kept = tmp_path / "out.failed"
    assert not killed.exists() and (kept / "work" / "done.txt").read_text() == "an hour of work"
    assert err.value.kept_at == kept
    # A kept folder resumes in place and, finished, becomes the target.
    with atomic_dir(target, tool="t", resume=kept) as tmp:
        assert tmp == kept
        (tmp / "report.json").write_text("{}")
    assert not kept.exists() and (target / "work" / "done.txt").is_file() and output_owner(target) == "t"


@pytest.mark.parametrize("name", ["mine", "other.failed", ".other.tmp-1"])
def test_only_an_attempt_at_the_same_target_can_be_resumed(tmp_path, name):
    folder = tmp_path / name
    folder.mkdir()
    with pytest.raises(OutputError, match="not an earlier attempt"), atomic_dir(tmp_path / "out", resume=folder):
        pass
    assert folder.is_dir() and not (tmp_path / "out").exists()
    with pytest.raises(OutputError, match="not an earlier attempt"):
        earlier_attempt(tmp_path / "out", tmp_path / "sub" / "out.failed")


def test_a_folder_lock_admits_one_writer_and_leaves_nothing_when_nothing_was_written(tmp_path):
    from ema_boundary.io import LOCK, LOCK_INFO, FolderLock, OutputError, check_output_dir

    folder = tmp_path / "run"
    first = FolderLock(folder, "train.py", ["train.py", "--max_steps", "3"])
    assert first.acquire() is None
    holder = json.loads((folder / LOCK_INFO).read_text())
    assert holder["pid"] == os.getpid() and holder["command"] == ["train.py", "--max_steps", "3"]
    check_output_dir(folder, tool="train.py")  # the lock files are not content
    with pytest.raises(OutputError, match=rf"^{folder}: another train.py is writing this folder \(pid {os.getpid()} "
                                          r"on .*: train.py --max_steps 3\)"):
        FolderLock(folder, "train.py").acquire()
    first.release()
    assert not folder.exists()  # it created the folder and nothing else was written: gone again

    with FolderLock(folder, "train.py") as lock:
        (folder / "metrics.jsonl").write_text("")
        assert lock.holder()["tool"] == "train.py"
    assert sorted(p.name for p in folder.iterdir()) == [LOCK, "metrics.jsonl"]  # kept: the run wrote something
    (folder / LOCK_INFO).write_text(json.dumps({"pid": 1, "host": "gone"}))  # as a killed holder leaves it
    again = FolderLock(folder, "train.py")
    assert again.acquire() == {"pid": 1, "host": "gone"}  # the stale record, taken over
    again.release()


def test_atomic_files_replace_together_or_not_at_all(tmp_path):
    (tmp_path / "a.json").write_text("old a")
    (tmp_path / "b.png").write_text("old b")
    with atomic_files(tmp_path, ("a.json", "b.png")) as scratch:
        (scratch / "a.json").write_text("new a")
        (scratch / "b.png").write_text("new b")
        (scratch / "input").mkdir()  # not named: not published
    assert (tmp_path / "a.json").read_text() == "new a" and (tmp_path / "b.png").read_text() == "new b"
    with pytest.raises(RuntimeError), atomic_files(tmp_path) as scratch:
        (scratch / "a.json").write_text("newer a")
        raise RuntimeError("the figure failed")
    assert (tmp_path / "a.json").read_text() == "new a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.png"]  # no scratch left, nothing extra
