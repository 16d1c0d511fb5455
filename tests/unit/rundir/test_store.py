"""The ledger of a run directory: what is written is found again, exactly once, whatever a crash left."""

from __future__ import annotations

from hermes_runner.rundir.layout import DISCARDED, LEDGER
from hermes_runner.rundir.store import AppendLog, RunStore, dumps_line


def record(key: str, index: int) -> dict:
    return {"key": key, "index": index, "inv": 0}


def test_records_point_at_their_trajectories_and_load_back(tmp_path):
    store = RunStore(tmp_path)
    store.write_trajectory("ok", 0, dumps_line({"prompt_index": 0, "v": "a"}), record("a", 0))
    store.write_trajectory("discarded", 0, dumps_line({"prompt_index": 1, "v": "b"}), record("b", 1))
    store.write_failure(record("c", 2), {"traceback": "tb"})
    store.close()
    state = RunStore(tmp_path).load()
    assert set(state.terminal) == {"a", "b"} and set(state.failed) == {"c"} and state.records == 3
    a, b = state.terminal["a"], state.terminal["b"]
    assert (a.status, a.file, b.status, b.file) == ("ok", "batch_0.jsonl", "discarded", DISCARDED)
    handles: dict[str, int] = {}
    assert RunStore(tmp_path).read_entry(a, handles) == dumps_line({"prompt_index": 0, "v": "a"})
    assert state.next_batch == 1


def test_the_first_terminal_record_wins_and_a_later_success_clears_a_failure(tmp_path):
    store = RunStore(tmp_path)
    store.write_failure(record("a", 0), {})
    store.write_trajectory("ok", 0, dumps_line({"n": 1}), record("a", 0))
    store.write_trajectory("ok", 1, dumps_line({"n": 2}), record("a", 0))  # a duplicate, e.g. a rerun's
    store.close()
    state = RunStore(tmp_path).load()
    assert state.failed == {} and state.terminal["a"].batch == 0 and state.records == 3


def test_a_torn_last_line_is_cut_and_a_record_past_the_file_end_runs_again(tmp_path):
    store = RunStore(tmp_path)
    store.write_trajectory("ok", 0, dumps_line({"n": 1}), record("a", 0))
    store.write_trajectory("ok", 0, dumps_line({"n": 2}), record("b", 1))
    store.close()
    batch = tmp_path / "batch_0.jsonl"
    batch.write_bytes(batch.read_bytes()[:-3])  # the trajectory of b lost its end (a crash before fsync)
    with (tmp_path / LEDGER).open("ab") as fp:
        fp.write(b'{"key": "c", "sta')  # a torn record
    state = RunStore(tmp_path).load()
    assert set(state.terminal) == {"a"} and state.records == 2  # b runs again; the torn record is gone
    assert (tmp_path / LEDGER).read_bytes().endswith(b"\n")


def test_append_log_gives_offsets_and_repairs_on_open(tmp_path):
    path = tmp_path / "x.jsonl"
    log = AppendLog(path)
    assert log.append(b"one\n") == (0, 4) and log.append(b"two\n") == (4, 4)
    log.close()
    path.write_bytes(path.read_bytes() + b"thr")
    AppendLog(path).close()
    assert path.read_bytes() == b"one\ntwo\n"


def test_a_refused_run_leaves_its_dir_as_it_was_and_a_lock_taken_meanwhile_is_real(tmp_path, monkeypatch):
    import fcntl
    import os

    from hermes_runner.rundir import store as store_mod
    from hermes_runner.rundir.layout import LOCK

    run_dir = tmp_path / "outputs" / "r"
    refused = RunStore(run_dir)
    refused.lock(claim=False)
    assert (run_dir / LOCK).read_bytes() == b""  # (no pid before the dir's checks passed)
    refused.abandon()
    assert not (tmp_path / "outputs").exists()  # the dirs and the .lock it made are gone

    run_dir.mkdir(parents=True)
    flock, calls = fcntl.flock, []

    def racing_flock(fd, op):  # the refuser removes the .lock between our open and our flock
        if not calls:
            os.unlink(run_dir / LOCK)
        calls.append(fd)
        return flock(fd, op)

    monkeypatch.setattr(store_mod.fcntl, "flock", racing_flock)
    fd = store_mod._take_lock(run_dir)
    assert len(calls) == 2 and os.fstat(fd).st_ino == os.stat(run_dir / LOCK).st_ino  # locked the file that is there
    os.close(fd)
