"""The commit lease (I14): mutual exclusion among our writers, and breaking only dead leases."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from omnigraph_spark.store import lease
from omnigraph_spark.store.fs import RootStorage
from omnigraph_spark.store.layout import RootPaths, join


def _path(root: str) -> str:
    return join(RootPaths(root).spark_dir, "commit.lease")


def test_create_text_never_exposes_partial_content(tmp_path):  # I14
    """A reader racing a create sees nothing or the whole file, never an empty one (CI flake)."""
    st = RootStorage(str(tmp_path))
    body = json.dumps({"token": "x" * 4000})
    seen = []
    stop = threading.Event()
    target = str(tmp_path / "f.json")

    def reader():
        while not stop.is_set():
            try:
                seen.append(st.read_text(target))
            except FileNotFoundError:
                pass

    t = threading.Thread(target=reader)
    t.start()
    try:
        for _ in range(200):
            assert st.create_text(target, body)
            assert not st.create_text(target, "other")
            os.remove(target)
    finally:
        stop.set()
        t.join()
    assert seen and all(s == body for s in seen)
    assert sorted(os.listdir(tmp_path)) == []  # no temp files left


def test_fresh_unparsable_lease_is_not_broken(tmp_path):  # I14
    st = RootStorage(str(tmp_path))
    p = _path(str(tmp_path))
    os.makedirs(os.path.dirname(p))
    open(p, "w").close()  # being written by a store without atomic create
    lease._break_if_stale(st, p)
    assert os.path.exists(p)
    old = time.time() - lease.UNPARSABLE_GRACE_S - 5
    os.utime(p, (old, old))  # the same file long after: corrupt, so stale
    lease._break_if_stale(st, p)
    assert not os.path.exists(p)


def test_lease_of_a_dead_process_is_broken_and_a_live_one_is_kept(tmp_path):  # I14
    import socket

    st = RootStorage(str(tmp_path))
    p = _path(str(tmp_path))
    os.makedirs(os.path.dirname(p))
    live = {"token": "a", "host": socket.gethostname(), "pid": os.getpid(), "expires_at": time.time() + 60}
    st.write_text(p, json.dumps(live))
    lease._break_if_stale(st, p)
    assert json.loads(st.read_text(p))["token"] == "a"
    dead = dict(live, token="b", pid=2**22 + 12345)
    st.write_text(p, json.dumps(dead))
    lease._break_if_stale(st, p)
    assert not os.path.exists(p)


def test_breaking_puts_back_a_lease_retaken_meanwhile(tmp_path):  # I14
    p = _path(str(tmp_path))
    os.makedirs(os.path.dirname(p))
    with open(p, "w") as f:
        json.dump({"token": "fresh"}, f)
    lease._move_aside_if_same(p, "dead-one")  # judged stale when it held 'dead-one'
    assert json.loads(open(p).read())["token"] == "fresh"
    assert [n for n in os.listdir(os.path.dirname(p)) if ".stale." in n] == []


def _contend(st: RootStorage, root: str, rounds: int, pause_s: float, timeout_s: float):
    """Six threads take the lease ``rounds`` times each. Returns (takes, most holders at once, errors)."""
    inside, worst, taken, errors = [0], [0], [0], []
    mu = threading.Lock()

    def worker():
        try:
            for _ in range(rounds):
                with lease.hold(st, root, timeout_s=timeout_s):
                    with mu:
                        inside[0] += 1
                        taken[0] += 1
                        worst[0] = max(worst[0], inside[0])
                    time.sleep(pause_s)
                    with mu:
                        inside[0] -= 1
        except Exception as e:  # pragma: no cover - reported by the caller's assertion
            errors.append(e)

    ts = [threading.Thread(target=worker) for _ in range(6)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return taken[0], worst[0], errors


def test_threads_hold_the_lease_one_at_a_time(tmp_path):  # I14
    st = RootStorage(str(tmp_path))
    _, worst, errors = _contend(st, str(tmp_path), rounds=15, pause_s=0.001, timeout_s=60)
    assert errors == [] and worst == 1
    assert not os.path.exists(_path(str(tmp_path)))


def test_create_text_without_hard_links_still_creates_once(tmp_path, monkeypatch):  # I14
    def no_links(src, dst):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    st = RootStorage(str(tmp_path))
    target = str(tmp_path / "f.json")
    assert st.create_text(target, "one") and not st.create_text(target, "two")
    assert st.read_text(target) == "one" and os.listdir(tmp_path) == ["f.json"]


# --- object stores: the lease is a compare-and-swap on a Lance dataset (S3: moto, SeaweedFS) ---


def _s3_storage(s3_graph_root):
    root, so = s3_graph_root
    return root, RootStorage(root, so)


def _slot(root, so) -> lease._LanceSlot:
    return lease._LanceSlot(join(RootPaths(root).spark_dir, "commit_lease.lance"), so)


def _lease_record(root, so):
    return _slot(root, so)._read()[1]


def test_object_store_threads_hold_the_lease_one_at_a_time(s3_graph_root):  # I14
    """Six writers, no atomic file create on S3: the Lance version CAS admits one at a time."""
    root, st = _s3_storage(s3_graph_root)
    taken, worst, errors = _contend(st, root, rounds=4, pause_s=0.01, timeout_s=120)
    assert errors == [] and taken == 24 and worst == 1
    assert _lease_record(root, st.storage_options) == {}  # released


def test_object_store_stale_lease_is_broken_and_a_live_one_waits(s3_graph_root):  # I14
    import socket

    from omnigraph_spark.errors import LeaseTimeoutError

    root, st = _s3_storage(s3_graph_root)
    slot = _slot(root, st.storage_options)
    live = {"token": "live", "host": "elsewhere", "pid": 1, "expires_at": time.time() + 60}
    assert slot.try_take(live)
    with pytest.raises(LeaseTimeoutError) as e:
        with lease.hold(st, root, timeout_s=0.3):
            pass
    assert "commit_lease.lance" in str(e.value)
    assert _lease_record(root, st.storage_options)["token"] == "live"  # not broken

    dead = {"token": "dead", "host": socket.gethostname(), "pid": 2**22 + 12345, "expires_at": time.time() + 60}
    slot.release("live")
    assert slot.try_take(dead)
    with lease.hold(st, root, timeout_s=30) as token:  # a dead holder on this host: broken at once
        assert _lease_record(root, st.storage_options)["token"] == token
    expired = {"token": "old", "host": "elsewhere", "pid": 1, "expires_at": time.time() - 1}
    assert slot.try_take(expired)
    with lease.hold(st, root, timeout_s=30) as token:
        assert _lease_record(root, st.storage_options)["token"] == token
    assert _lease_record(root, st.storage_options) == {}


def test_object_store_release_keeps_a_lease_taken_over_meanwhile(s3_graph_root):  # I14
    root, st = _s3_storage(s3_graph_root)
    slot = _slot(root, st.storage_options)
    assert slot.try_take({"token": "mine", "expires_at": time.time() - 1})  # expired while held
    assert slot.try_take({"token": "next", "expires_at": time.time() + 60})  # broken by the next writer
    slot.release("mine")
    assert _lease_record(root, st.storage_options)["token"] == "next"


def test_object_store_lease_prunes_its_old_versions(s3_graph_root, monkeypatch):  # I14
    root, st = _s3_storage(s3_graph_root)
    monkeypatch.setattr(lease, "CAS_PRUNE_EVERY", 4)
    monkeypatch.setattr(lease, "CAS_PRUNE_OLDER_THAN_S", 0.0)
    for _ in range(6):
        with lease.hold(st, root, timeout_s=30):
            pass
    ds, _ = _slot(root, st.storage_options)._read()
    assert ds.version == 12  # take + release per window
    assert [v["version"] for v in ds.versions()] == [12]  # releases at v4, v8, v12 pruned the rest
    assert _lease_record(root, st.storage_options) == {}
