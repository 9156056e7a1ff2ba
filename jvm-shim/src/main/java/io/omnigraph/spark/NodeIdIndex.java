package io.omnigraph.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.ref.SoftReference;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.ipc.ArrowReader;
import org.lance.Dataset;
import org.lance.file.LanceFileReader;
import org.lance.ipc.LanceScanner;
import org.lance.ipc.ScanOptions;

/**
 * The ids of one node type, as the endpoint check of a load sees them: the committed table at a
 * pinned version (absent when the load overwrites the type) plus the data files the load staged
 * for it. An exact, read-only hash set over the ids' UTF-8 bytes, shared by every task of an
 * executor that checks against the same source.
 *
 * <p>Why it exists: checking edge endpoints inside the staging tasks lets the driver skip its own
 * probe (2M endpoints against 1M ids cost as much as staging the edges). The task only proves
 * absence of dangling edges: any miss, and the driver runs its exact check, which words the error.
 * Within one load the source is immutable (a pinned version, finished files); soft references
 * let the GC reclaim an index when memory runs short.
 */
final class NodeIdIndex {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(NodeIdIndex.class);
  private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle INTS = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
  private static final int MAX_CACHED = 4;
  /** an index may take at most this share of the executor's heap (else: "not checked") */
  private static final double HEAP_SHARE = 0.25;
  /** load token + source JSON -> the index being built or built; guarded by itself */
  private static final Map<String, SoftReference<CompletableFuture<NodeIdIndex>>> CACHE =
      new LinkedHashMap<>(8, 0.75f, true);

  private final byte[] arena; // each id as a 4-byte length, then its UTF-8 bytes
  private final long[] slots; // open addressing: the hash's high 32 bits | (arena offset + 1); 0 = empty
  private final int mask;

  /** One probe touches one slot and (on a fingerprint match) one arena spot: two cache misses. */
  private NodeIdIndex(byte[] arena, int end, int n) {
    this.arena = arena;
    int cap = Integer.highestOneBit(Math.max(2, n) * 2 - 1) << 1; // a power of two >= 2n
    this.slots = new long[cap];
    this.mask = cap - 1;
    long[] hashes = new long[n]; // all hashes first: the inserts' loads then overlap
    int[] at = new int[n];
    for (int i = 0, pos = 0; i < n; i++) {
      int len = (int) INTS.get(arena, pos);
      hashes[i] = hash(arena, pos + 4, len);
      at[i] = pos;
      pos += 4 + len;
    }
    for (int i = 0; i < n; i++) {
      long h = hashes[i];
      int s = (int) h & mask;
      while (slots[s] != 0) {
        s = (s + 1) & mask;
      }
      slots[s] = (h & 0xFFFFFFFF00000000L) | (at[i] + 1L);
    }
  }

  /**
   * The index of {@code source} ({"table": {path, branch, version} | null, "files": [...]}), built
   * once per executor and load ({@code load}: a token unique to the load). Never shared across
   * loads: a Lance branch deleted and re-created can reuse a version number for other rows.
   */
  static CompletableFuture<NodeIdIndex> of(String load, JsonNode source) {
    String key = load + " " + source;
    synchronized (CACHE) {
      SoftReference<CompletableFuture<NodeIdIndex>> ref = CACHE.get(key);
      CompletableFuture<NodeIdIndex> f = ref == null ? null : ref.get();
      if (f == null || f.isCompletedExceptionally()) {
        f = CompletableFuture.supplyAsync(() -> build(source));
        CACHE.put(key, new SoftReference<>(f));
        Iterator<String> oldest = CACHE.keySet().iterator();
        while (CACHE.size() > MAX_CACHED && oldest.hasNext()) {
          oldest.next();
          oldest.remove();
        }
      }
      return f;
    }
  }

  /** Is the id ``value[off, off + len)`` (hash ``h``) in the set? Linear probing from slot ``from``. */
  boolean contains(byte[] value, int off, int len, long h, int from) {
    long high = h & 0xFFFFFFFF00000000L;
    for (int s = from; ; s = (s + 1) & mask) {
      long e = slots[s];
      if (e == 0) {
        return false;
      }
      if ((e & 0xFFFFFFFF00000000L) == high) {
        int at = (int) e - 1;
        if ((int) INTS.get(arena, at) == len && Arrays.equals(arena, at + 4, at + 4 + len, value, off, off + len)) {
          return true;
        }
      }
    }
  }

  /**
   * Probes many values at once, in blocks: first every hash, then every first slot, then the
   * lookups. The slot loads of a block do not depend on each other, so the CPU overlaps their
   * cache misses instead of paying them one after another; the lookups then find them cached.
   */
  static final class Probe {
    private static final int BLOCK = 256;
    private final long[] hashes = new long[BLOCK];
    private long loaded; // keeps the slot loads from being optimised away

    /** How many of ``n`` values (``bytes[starts[i], +lens[i])``) are not in ``index``; counts each value's hash bucket in ``buckets`` (if given). */
    long misses(NodeIdIndex index, byte[] bytes, int[] starts, int[] lens, int n, int[] buckets) {
      long missing = 0;
      long[] slots = index.slots;
      int mask = index.mask;
      for (int b = 0; b < n; b += BLOCK) {
        int m = Math.min(BLOCK, n - b);
        for (int j = 0; j < m; j++) {
          hashes[j] = hash(bytes, starts[b + j], lens[b + j]);
        }
        long any = 0;
        for (int j = 0; j < m; j++) {
          any |= slots[(int) hashes[j] & mask];
        }
        loaded |= any;
        for (int j = 0; j < m; j++) {
          long h = hashes[j];
          if (buckets != null) {
            buckets[(int) (h >>> 40) & (buckets.length - 1)]++;
          }
          if (!index.contains(bytes, starts[b + j], lens[b + j], h, (int) h & mask)) {
            missing++;
          }
        }
      }
      return missing;
    }
  }

  /** A 64-bit hash of {@code len} bytes: 8-byte words, a multiply-xorshift mix per word and at the end. */
  static long hash(byte[] b, int off, int len) {
    long h = 0x9E3779B97F4A7C15L ^ len;
    int i = off;
    int end = off + len;
    for (; i + 8 <= end; i += 8) {
      h = (h ^ (long) LONGS.get(b, i)) * 0xBF58476D1CE4E5B9L;
      h ^= h >>> 31;
    }
    long tail = 0;
    for (int shift = 0; i < end; i++, shift += 8) {
      tail |= (b[i] & 0xFFL) << shift;
    }
    h = (h ^ tail) * 0x94D049BB133111EBL;
    h ^= h >>> 29;
    h *= 0xBF58476D1CE4E5B9L;
    return h ^ (h >>> 32);
  }

  private static NodeIdIndex build(JsonNode source) {
    long t0 = System.nanoTime();
    Collector c = new Collector();
    try (BufferAllocator allocator = new RootAllocator()) {
      JsonNode table = source.get("table");
      if (table != null && !table.isNull()) {
        JsonNode branch = table.get("branch");
        try (Dataset ds = LanceSnapshotSource.openAt(allocator, table.get("path").asText(),
                 branch == null || branch.isNull() ? null : branch.asText(), table.get("version").asLong());
             LanceScanner sc = LanceScanner.create(ds,
                 new ScanOptions.Builder().columns(Collections.singletonList("id")).batchSize(262_144).build(),
                 allocator);
             ArrowReader r = sc.scanBatches()) {
          c.addAll(r);
        }
      }
      for (JsonNode f : source.get("files")) {
        try (LanceFileReader fr = LanceFileReader.open(f.asText(), allocator);
             ArrowReader r = fr.readAll(Collections.singletonList("id"), null, 262_144)) {
          c.addAll(r);
        }
      }
    } catch (Exception e) {
      throw new IllegalStateException("cannot read the node ids of " + source, e);
    }
    long t1 = System.nanoTime();
    NodeIdIndex index = new NodeIdIndex(c.bytes, c.end, c.n);
    LOG.info("indexed {} node ids in {} ms (read {} ms) for the endpoint check: {}", c.n,
        (System.nanoTime() - t0) / 1_000_000, (t1 - t0) / 1_000_000, source);
    return index;
  }

  /** Appends every non-null id of a stream to one byte arena (length-prefixed). */
  private static final class Collector {
    byte[] bytes = new byte[1 << 16];
    int end;
    int n;

    void addAll(ArrowReader r) throws IOException {
      while (r.loadNextBatch()) {
        VarCharVector v = (VarCharVector) r.getVectorSchemaRoot().getVector("id");
        int rows = v.getValueCount();
        long need = (long) end + v.getDataBuffer().writerIndex() + 4L * rows;
        if (need > Integer.MAX_VALUE - 16 || need + 40L * (n + rows) > HEAP_SHARE * Runtime.getRuntime().maxMemory()) {
          // the arena, its slots and the build's scratch would take too much of this executor
          throw new IllegalStateException("too many node ids to index in this executor (" + (n + rows) + "+)");
        }
        if (need > bytes.length) {
          bytes = Arrays.copyOf(bytes, (int) Math.min(Integer.MAX_VALUE - 16, Math.max(need, 2L * bytes.length)));
        }
        StringValues ids = new StringValues(v);
        for (int i = 0; i < ids.n; i++) {
          int len = ids.lens[i];
          INTS.set(bytes, end, len);
          System.arraycopy(ids.bytes, ids.starts[i], bytes, end + 4, len);
          end += 4 + len;
        }
        n += ids.n;
      }
    }
  }
}
