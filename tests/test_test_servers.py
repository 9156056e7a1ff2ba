"""The test servers' own plumbing (tests/object_store.py): a SeaweedFS build running beside the
tests (.ci/run) is waited for, and its failure is the reason the SeaweedFS cases give."""

from __future__ import annotations

import threading

from . import object_store


def test_a_build_beside_the_tests_is_waited_for(tmp_path, monkeypatch):
    done = tmp_path / "seaweedfs.done"
    monkeypatch.setenv("OMNIGRAPH_SEAWEEDFS_PENDING", str(done))
    monkeypatch.setenv("OMNIGRAPH_SEAWEEDFS_BIN", "/nonexistent/weed")  # the pending build wins
    weed = tmp_path / "weed"
    weed.write_text("#!/bin/sh\n")
    weed.chmod(0o755)
    threading.Timer(1.0, lambda: done.write_text(f"{weed}\n")).start()
    assert object_store.seaweedfs_bin() == str(weed)


def test_a_failed_build_is_the_reason(tmp_path, monkeypatch):
    done = tmp_path / "seaweedfs.done"
    done.write_text("FAILED\n")
    monkeypatch.setenv("OMNIGRAPH_SEAWEEDFS_PENDING", str(done))
    assert object_store.seaweedfs_bin() is None
    assert "did not produce a binary" in object_store.seaweedfs_missing()
    assert "FAILED" in object_store.seaweedfs_missing()
