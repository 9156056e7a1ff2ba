package io.omnigraph.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.UUID;
import java.util.zip.CRC32C;

/**
 * A {@link NodeIdIndex} kept as a file beside the graph, so that the next load checking against
 * the same node rows reads it instead of building it from the table: otherwise an edge append
 * in a cold process re-reads and hashes every committed node id.
 *
 * <p>A cache, never a source of truth. A file is named by a hash of its {@linkplain
 * NodeIdIndex#rowsKey rows key} (which data files and deletion files the ids came from, all of
 * them immutable in Lance) and holds that key in full: it is used only by a load whose source
 * has exactly that key, only if its checksum matches, and any file may be deleted at any time
 * (the next load builds the index again). The graph's {@code cleanup} deletes them all; a
 * directory keeps at most {@link #MAX_FILES}, the least recently used going first.
 *
 * <p>Layout (little-endian): magic, key length and UTF-8 key, slots, ids, arena bytes, the slots'
 * layout (0 bytes, 1 ULID slots: see {@link NodeIdIndex}), the slots as longs, the arena, then a
 * CRC32C of everything before it. Written to a temporary name
 * and renamed into place, so a reader sees a whole file or none. Local graph roots only (the
 * Python planner passes no directory otherwise).
 */
final class IdIndexFile {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(IdIndexFile.class);
  private static final long MAGIC = 0x3258444944494F4FL; // "OOIDIDX2" little-endian (1: without the layout)
  static final String SUFFIX = ".ids";
  /** index files a directory keeps (each up to a quarter of an executor's heap) */
  static final int MAX_FILES = 8;
  /** a temporary file this old is a writer that died: deleted by the next write */
  private static final long STALE_TMP_MILLIS = 3_600_000;
  private static final int CHUNK = 1 << 22;

  private IdIndexFile() {}

  /** The file name of a rows key: the hex SHA-256 of its UTF-8 bytes. */
  static String name(String rowsKey) {
    try {
      byte[] h = MessageDigest.getInstance("SHA-256").digest(rowsKey.getBytes(StandardCharsets.UTF_8));
      return HexFormat.of().formatHex(h) + SUFFIX;
    } catch (NoSuchAlgorithmException e) { // every JDK has SHA-256
      throw new IllegalStateException(e);
    }
  }

  /**
   * The index kept for {@code rowsKey} in {@code dir}, or null: no such file, another key, a bad
   * checksum or size, or more than {@code budget} bytes of heap. A damaged file is deleted.
   */
  static NodeIdIndex read(Path dir, String rowsKey, double budget) {
    Path p = dir.resolve(name(rowsKey));
    long t0 = System.nanoTime();
    byte[] key = rowsKey.getBytes(StandardCharsets.UTF_8);
    try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
      CRC32C crc = new CRC32C();
      ByteBuffer head = ByteBuffer.allocate(8 + 4 + key.length + 16).order(ByteOrder.LITTLE_ENDIAN);
      readFully(ch, head);
      head.flip();
      if (head.getLong() != MAGIC || head.getInt() != key.length) {
        return damaged(p, "not an index of these rows");
      }
      byte[] stored = new byte[key.length];
      head.get(stored);
      if (!java.util.Arrays.equals(stored, key)) {
        return damaged(p, "another rows key under this name");
      }
      int cap = head.getInt();
      int size = head.getInt();
      int arenaLen = head.getInt();
      int layout = head.getInt();
      long body = 16L * cap + arenaLen;
      if (cap < 2 || size < 0 || size > cap || arenaLen < 0 || (layout != 0 && layout != 1)
          || (layout == 1 && arenaLen != 0) || ch.size() != head.capacity() + body + 8) {
        return damaged(p, "bad sizes");
      }
      if (body > budget) {
        LOG.info("the kept index {} takes {} bytes, over a quarter of this executor's heap: not read", p, body);
        return null;
      }
      crc.update(head.array(), 0, head.capacity());
      long[] slots = new long[2 * cap];
      byte[] arena = new byte[arenaLen];
      ByteBuffer buf = ByteBuffer.allocateDirect(CHUNK).order(ByteOrder.LITTLE_ENDIAN);
      for (int at = 0; at < slots.length; ) {
        int n = Math.min(CHUNK / 8, slots.length - at);
        buf.clear().limit(8 * n);
        readFully(ch, buf);
        buf.flip();
        crc.update(buf);
        buf.flip();
        buf.asLongBuffer().get(slots, at, n);
        at += n;
      }
      ByteBuffer a = ByteBuffer.wrap(arena);
      readFully(ch, a);
      crc.update(arena, 0, arenaLen);
      ByteBuffer tail = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
      readFully(ch, tail);
      tail.flip();
      if (tail.getLong() != crc.getValue()) {
        return damaged(p, "checksum mismatch");
      }
      try {
        Files.setLastModifiedTime(p, FileTime.fromMillis(System.currentTimeMillis())); // recently used
      } catch (IOException e) {
        LOG.debug("cannot touch {}: {}", p, e.toString());
      }
      LOG.info("read the kept index of {} node ids in {} ms: {}", size, (System.nanoTime() - t0) / 1_000_000, p);
      return NodeIdIndex.restored(slots, arena, cap, size, layout == 1);
    } catch (NoSuchFileException e) {
      return null;
    } catch (IOException | RuntimeException e) {
      LOG.info("the kept index {} is not used: {}", p, e.toString());
      return null;
    }
  }

  private static NodeIdIndex damaged(Path p, String why) {
    LOG.warn("the kept index {} is not used ({}) and is deleted", p, why);
    try {
      Files.deleteIfExists(p);
    } catch (IOException e) {
      LOG.debug("cannot delete {}: {}", p, e.toString());
    }
    return null;
  }

  /** Keeps {@code index} of {@code rowsKey} in {@code dir} unless a file of that key is there; then prunes the directory. */
  static void write(Path dir, String rowsKey, NodeIdIndex index) {
    Path target = dir.resolve(name(rowsKey));
    if (Files.exists(target)) {
      return;
    }
    long t0 = System.nanoTime();
    Path tmp = dir.resolve("." + target.getFileName() + "." + UUID.randomUUID() + ".tmp");
    try {
      Files.createDirectories(dir);
      byte[] key = rowsKey.getBytes(StandardCharsets.UTF_8);
      long[] slots = index.slots();
      byte[] arena = index.arena();
      CRC32C crc = new CRC32C();
      try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
        ByteBuffer head = ByteBuffer.allocate(8 + 4 + key.length + 16).order(ByteOrder.LITTLE_ENDIAN);
        head.putLong(MAGIC).putInt(key.length).put(key).putInt(index.capacity()).putInt(index.size()).putInt(arena.length)
            .putInt(index.ulids() ? 1 : 0);
        crc.update(head.array(), 0, head.capacity());
        head.flip();
        writeFully(ch, head);
        ByteBuffer buf = ByteBuffer.allocateDirect(CHUNK).order(ByteOrder.LITTLE_ENDIAN);
        for (int at = 0; at < slots.length; ) {
          int n = Math.min(CHUNK / 8, slots.length - at);
          buf.clear();
          buf.asLongBuffer().put(slots, at, n);
          buf.limit(8 * n);
          crc.update(buf);
          buf.flip();
          writeFully(ch, buf);
          at += n;
        }
        crc.update(arena, 0, arena.length);
        writeFully(ch, ByteBuffer.wrap(arena));
        ByteBuffer tail = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(crc.getValue());
        tail.flip();
        writeFully(ch, tail);
      }
      Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE);
      LOG.info("kept the index of {} node ids in {} ms: {}", index.size(), (System.nanoTime() - t0) / 1_000_000, target);
    } catch (IOException | RuntimeException e) {
      LOG.info("the index of {} node ids is not kept in {}: {}", index.size(), dir, e.toString());
      try {
        Files.deleteIfExists(tmp);
      } catch (IOException ignored) {
        // a stale temporary file: the next write deletes it
      }
      return;
    }
    prune(dir);
  }

  /** Deletes all but the {@link #MAX_FILES} most recently used index files, and stale temporary files. */
  static void prune(Path dir) {
    List<Path> kept = new ArrayList<>();
    long now = System.currentTimeMillis();
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir)) {
      for (Path p : ds) {
        String n = p.getFileName().toString();
        if (n.endsWith(SUFFIX) && !n.startsWith(".")) {
          kept.add(p);
        } else if (n.endsWith(".tmp") && now - Files.getLastModifiedTime(p).toMillis() > STALE_TMP_MILLIS) {
          Files.deleteIfExists(p);
        }
      }
      if (kept.size() <= MAX_FILES) {
        return;
      }
      kept.sort(Comparator.comparingLong(IdIndexFile::modified).reversed());
      for (Path p : kept.subList(MAX_FILES, kept.size())) {
        Files.deleteIfExists(p);
      }
    } catch (IOException e) {
      LOG.debug("cannot prune {}: {}", dir, e.toString());
    }
  }

  private static long modified(Path p) {
    try {
      return Files.getLastModifiedTime(p).toMillis();
    } catch (IOException e) {
      return 0;
    }
  }

  private static void readFully(FileChannel ch, ByteBuffer b) throws IOException {
    while (b.hasRemaining()) {
      if (ch.read(b) < 0) {
        throw new IOException("truncated");
      }
    }
  }

  private static void writeFully(FileChannel ch, ByteBuffer b) throws IOException {
    while (b.hasRemaining()) {
      ch.write(b);
    }
  }
}
