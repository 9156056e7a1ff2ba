#!/usr/bin/env bash
# `java` for the tests' JVMs, with class-data sharing (CDS) per class path: the JDK 17 form of
# JDK 19's -XX:+AutoCreateSharedArchive. tests/jvm_cds.py installs it as bin/java of a JAVA_HOME
# that links everything else to the real JDK, with REAL_JAVA and ARCHIVES filled in.
#
# A JVM whose class path has an archive maps its classes from it (a Spark application's JVM
# starts in less CPU). Without one, the first Spark driver of that class path that Python started
# (`pyspark-shell` among its arguments) writes one when it exits, to a part file renamed into
# place only when the JVM exited cleanly; the JVM checks an archive against its class path and
# JDK, and runs without it, silently, on any mismatch. Every other JVM runs as if unwrapped.
set -u
REAL_JAVA=@REAL_JAVA@
ARCHIVES=@ARCHIVES@
QUIET=-Xlog:cds=off,cds+dynamic=off

cp=""
prev=""
driver=0
for a in "$@"; do
  case "$prev" in -cp|-classpath|--class-path) [ -z "$cp" ] && cp="$a" ;; esac
  case "$a" in -XX:SharedArchiveFile=*|-XX:ArchiveClassesAtExit=*|-Xshare:*) exec "$REAL_JAVA" "$@" ;; esac
  [ "$a" = pyspark-shell ] && driver=1
  prev="$a"
done
[ -n "$cp" ] || exec "$REAL_JAVA" "$@"

key="$(printf '%s' "$cp" | sha1sum | cut -c1-16)"
archive="$ARCHIVES/$key.jsa"
[ -s "$archive" ] && exec "$REAL_JAVA" -XX:SharedArchiveFile="$archive" "$QUIET" "$@"
[ "$driver" = 1 ] || exec "$REAL_JAVA" "$@"
# the JDK refuses to start a JVM that dumps with a non-empty directory on its class path
IFS=: read -r -a entries <<<"$cp"
for e in "${entries[@]}"; do
  if [ -d "$e" ] && [ -n "$(ls -A "$e" 2>/dev/null)" ]; then exec "$REAL_JAVA" "$@"; fi
done

# The lock names its writer; a writer that died mid-dump (its process group killed) leaves it to
# the next driver, which moves it aside (one mv wins) and writes the archive itself.
lock="$ARCHIVES/$key.lock"
if ! mkdir "$lock" 2>/dev/null; then
  owner="$(cat "$lock/pid" 2>/dev/null || true)"
  if [ -n "$owner" ] && ! kill -0 "$owner" 2>/dev/null && mv "$lock" "$lock.stale.$$" 2>/dev/null; then
    rm -rf "$lock.stale.$$"
    mkdir "$lock" 2>/dev/null || exec "$REAL_JAVA" "$@"
  else
    exec "$REAL_JAVA" "$@"
  fi
fi
echo $$ >"$lock/pid"
part="$archive.part.$$"
# (stdin explicitly: a background job's would be /dev/null, and PySpark's JVM exits at its EOF)
"$REAL_JAVA" -XX:ArchiveClassesAtExit="$part" "$QUIET" "$@" <&0 &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT HUP
while :; do
  wait "$child"
  rc=$?
  kill -0 "$child" 2>/dev/null || break  # wait returned for a trapped signal: the JVM still runs
done
if [ "$rc" = 0 ] && [ -s "$part" ]; then mv -f "$part" "$archive"; else rm -f "$part"; fi
rm -rf "$lock"
exit "$rc"
