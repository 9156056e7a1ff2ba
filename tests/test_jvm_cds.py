"""The tests' class-data sharing (tests/jvm_cds.py, tests/java_cds.sh): the first Spark driver of
a class path writes its archive, later JVMs of that class path map classes from it, nothing else
changes (stdin, exit codes), and a writer killed mid-dump never blocks the next one."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from . import jvm_cds

ECHO = """
public class Echo {
    public static void main(String[] args) throws Exception {
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
        System.out.println("echo " + in.readLine());
        System.exit(args.length > 1 ? Integer.parseInt(args[1]) : 0);
    }
}
"""


@pytest.fixture
def cds(tmp_path, monkeypatch):
    """(wrapped java, class path of Echo (a jar), archives directory) in a fresh base."""
    if not shutil.which("javac"):
        pytest.skip("javac is not on PATH")
    monkeypatch.setenv("OMNIGRAPH_TEST_CDS", "1")
    real = jvm_cds._real_java_home()
    if real is None:  # this session's JAVA_HOME is the wrapper already: its marker names the JDK
        real = Path((Path(os.environ["JAVA_HOME"]) / jvm_cds.MARKER).read_text().strip())
    monkeypatch.setenv("JAVA_HOME", str(real))
    home = jvm_cds.install(tmp_path / "cds")
    assert home is not None, "a JDK 13+ writes dynamic archives"
    classes = tmp_path / "classes"
    classes.mkdir()
    (tmp_path / "Echo.java").write_text(ECHO)
    subprocess.run([str(real / "bin" / "javac"), "-d", str(classes), str(tmp_path / "Echo.java")], check=True)
    jar = tmp_path / "echo.jar"
    subprocess.run([str(real / "bin" / "jar"), "cf", str(jar), "-C", str(classes), "."], check=True)
    return Path(home) / "bin" / "java", str(jar), Path(home + "-archives")


def run(java, cp, *args, stdin="hi\n", extra=()):
    return subprocess.run(
        [str(java), *extra, "-cp", cp, "Echo", *args], input=stdin, capture_output=True, text=True, timeout=120
    )


def test_the_first_driver_writes_the_archive_and_the_next_jvm_maps_it(cds):
    java, cp, archives = cds
    first = run(java, cp, "pyspark-shell")
    assert first.returncode == 0 and first.stdout == "echo hi\n" and first.stderr == "", first
    assert [p.suffix for p in archives.iterdir()] == [".jsa"]  # renamed into place; the lock is gone
    second = run(java, cp, "not-a-driver", extra=("-Xlog:class+load=info",))
    assert second.returncode == 0 and "echo hi" in second.stdout and second.stderr == ""
    assert "Echo source: shared objects file (top)" in second.stdout


def test_only_a_pyspark_driver_writes_and_exit_codes_pass_through(cds):
    java, cp, archives = cds
    other = run(java, cp, "not-a-driver", "7")
    assert other.returncode == 7 and other.stdout == "echo hi\n"
    assert list(archives.iterdir()) == []
    failed = run(java, cp, "pyspark-shell", "3")  # a driver that failed keeps no archive
    assert failed.returncode == 3 and failed.stdout == "echo hi\n"
    assert list(archives.iterdir()) == []


def test_a_dead_writers_lock_is_taken_over(cds):
    java, cp, archives = cds
    probe = subprocess.Popen(["sleep", "0"])
    probe.wait()  # a pid that no longer runs
    first = run(java, cp, "pyspark-shell")  # names the class path's archive
    key = next(archives.iterdir()).stem
    (archives / f"{key}.jsa").unlink()
    (archives / f"{key}.lock").mkdir()  # as a writer killed mid-dump leaves it
    (archives / f"{key}.lock" / "pid").write_text(f"{probe.pid}\n")
    assert first.returncode == 0
    again = run(java, cp, "pyspark-shell")
    assert again.returncode == 0 and again.stdout == "echo hi\n"
    assert sorted(p.name for p in archives.iterdir()) == [f"{key}.jsa"]


def test_a_live_writers_lock_leaves_the_jvm_unwrapped(cds):
    java, cp, archives = cds
    first = run(java, cp, "pyspark-shell")
    key = next(archives.iterdir()).stem
    (archives / f"{key}.jsa").unlink()
    (archives / f"{key}.lock").mkdir()
    (archives / f"{key}.lock" / "pid").write_text(f"{os.getpid()}\n")  # this test process: alive
    assert first.returncode == 0
    second = run(java, cp, "pyspark-shell")
    assert second.returncode == 0 and second.stdout == "echo hi\n"
    assert sorted(p.name for p in archives.iterdir()) == [f"{key}.lock"]


def test_off_switch_and_no_double_wrapping(cds, monkeypatch):
    java, _, _ = cds
    monkeypatch.setenv("JAVA_HOME", str(java.parent.parent))
    assert jvm_cds.install() is None  # an xdist worker inherits the controller's wrapped JDK
    monkeypatch.setenv("OMNIGRAPH_TEST_CDS", "0")
    monkeypatch.delenv("JAVA_HOME")
    assert jvm_cds.install() is None


def test_a_class_path_with_a_non_empty_directory_is_never_dumped(cds, tmp_path):
    """The JDK refuses to start a JVM dumping with one (a Spark conf directory with files)."""
    java, cp, archives = cds
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("")
    res = run(java, f"{conf}:{cp}", "pyspark-shell")
    assert res.returncode == 0 and res.stdout == "echo hi\n" and res.stderr == "", res
    assert list(archives.iterdir()) == []
