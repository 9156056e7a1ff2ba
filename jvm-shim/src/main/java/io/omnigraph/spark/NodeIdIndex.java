package io.omnigraph.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.ref.SoftReference;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.ipc.ArrowReader;
import org.lance.Dataset;
import org.lance.Fragment;
import org.lance.FragmentMetadata;
import org.lance.file.LanceFileReader;
import org.lance.fragment.DataFile;
import org.lance.fragment.DeletionFile;
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
 *
 * <p>Layout: open addressing over 16-byte slots (two longs, see {@link Keys}). An id of at most
 * 15 bytes lives in its slot, so a probe costs one cache miss; a longer id's slot holds 56 bits
 * of its hash and where its bytes are in an arena, compared byte for byte on a match. Why: past
 * a few million ids neither the slots nor the ids fit the CPU caches, and an arena read per
 * probe made the probes ~4x slower (4M probes into 4M ids of 15 bytes: 560 vs 146 ms).
 */
final class NodeIdIndex {
  static {
    LanceDispatcherGuard.install(); // before this class's first Lance call (its javadoc)
  }

  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(NodeIdIndex.class);
  private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
  private static final int MAX_CACHED = 4;
  /** an index may take at most this share of the executor's heap (else: "not checked") */
  private static final double HEAP_SHARE = 0.25;
  /** ids up to this many bytes live in their slot */
  static final int INLINE = 15;
  /** the low byte of a slot's first word for an id kept in the arena (inline ids: length + 1) */
  private static final long IN_ARENA = 0xFF;
  /** load token + source JSON -> the index being built or built; guarded by itself */
  private static final Map<String, SoftReference<CompletableFuture<NodeIdIndex>>> CACHE = recentlyUsed();
  /** a committed table's content key (see {@link #contentKey}) -> its index, across loads; guarded by itself */
  private static final Map<String, SoftReference<NodeIdIndex>> BY_CONTENT = recentlyUsed();
  /** indexes built from the data (not taken from {@link #BY_CONTENT}), for tests */
  private static final AtomicLong BUILDS = new AtomicLong();

  private final long[] slots; // slot i: words 2i, 2i + 1; first word 0 = empty
  private final byte[] arena; // the bytes of the ids longer than INLINE, back to back
  private final int shift; // a hash's slot: its top bits
  private final int mask; // slots - 1: linear probing wraps
  private final int size; // ids in the set

  private NodeIdIndex(long[] slots, byte[] arena, int shift, int mask, int size) {
    this.slots = slots;
    this.size = size;
    this.arena = arena;
    this.shift = shift;
    this.mask = mask;
  }

  /**
   * The hashes and slot keys of a block of ids. An id of at most {@link #INLINE} bytes is its own
   * key: its length + 1 in the low byte of the first word and its first 7 bytes above, its bytes
   * 7 to 14 (zero-padded) in the second. A longer id's first word is {@link #IN_ARENA} below 56
   * bits of its hash; its second word is computed on insert (length and arena offset). A first
   * word is never 0, which marks an empty slot.
   */
  static final class Keys {
    static final int BLOCK = 256;
    final long[] hash = new long[BLOCK];
    final long[] k0 = new long[BLOCK];
    final long[] k1 = new long[BLOCK];

    /** Keys of the ids ``bytes[starts[from + j], +lens[from + j])``, j < m, into slots 0..m-1. */
    void fill(byte[] bytes, int[] starts, int[] lens, int from, int m) {
      for (int j = 0; j < m; j++) {
        int off = starts[from + j];
        int len = lens[from + j];
        if (len <= INLINE) {
          long w0 = bytesAt(bytes, off, Math.min(len, 7)) << 8 | (len + 1);
          long w1 = len <= 7 ? 0 : bytesAt(bytes, off + 7, len - 7);
          long h = (w0 ^ 0x9E3779B97F4A7C15L) * 0xBF58476D1CE4E5B9L;
          h = (h ^ (h >>> 31) ^ w1) * 0x94D049BB133111EBL;
          h ^= h >>> 29;
          h *= 0xBF58476D1CE4E5B9L;
          hash[j] = h ^ (h >>> 32);
          k0[j] = w0;
          k1[j] = w1;
        } else {
          long h = NodeIdIndex.hash(bytes, off, len);
          hash[j] = h;
          k0[j] = h << 8 | IN_ARENA;
          k1[j] = 0;
        }
      }
    }
  }

  /** Bytes ``b[off, off + n)`` (n <= 8) as a little-endian long; never reads past the array. */
  private static long bytesAt(byte[] b, int off, int n) {
    if (n == 0) {
      return 0;
    }
    if (off + 8 <= b.length) {
      long v = (long) LONGS.get(b, off);
      return n == 8 ? v : v & ((1L << (8 * n)) - 1);
    }
    long v = 0;
    for (int i = 0; i < n; i++) {
      v |= (b[off + i] & 0xFFL) << (8 * i);
    }
    return v;
  }

  /** An access-ordered map that drops its least recently used entry beyond {@link #MAX_CACHED}. */
  private static <V> Map<String, V> recentlyUsed() {
    return new LinkedHashMap<String, V>(8, 0.75f, true) {
      @Override
      protected boolean removeEldestEntry(Map.Entry<String, V> eldest) {
        return size() > MAX_CACHED;
      }
    };
  }

  /**
   * The index of {@code source} ({"table": {path, branch, version} | null, "files": [...]}), built
   * once per executor and load ({@code load}: a token unique to the load). Never shared across
   * loads: a Lance branch deleted and re-created can reuse a version number for other rows.
   * {@code storage}: the load's Lance storage options (empty on a local root).
   */
  static CompletableFuture<NodeIdIndex> of(String load, JsonNode source, java.util.Map<String, String> storage) {
    String key = load + " " + source;
    synchronized (CACHE) {
      SoftReference<CompletableFuture<NodeIdIndex>> ref = CACHE.get(key);
      CompletableFuture<NodeIdIndex> f = ref == null ? null : ref.get();
      if (f == null || f.isCompletedExceptionally()) {
        f = CompletableFuture.supplyAsync(() -> build(source, storage));
        CACHE.put(key, new SoftReference<>(f));
      }
      return f;
    }
  }

  /** Is the id ``b[off, off + len)`` (hash {@code h}, key words k0, k1) in the set? Linear probing. */
  private boolean contains(byte[] b, int off, int len, long h, long k0, long k1) {
    for (int s = (int) (h >>> shift); ; s = (s + 1) & mask) {
      long e = slots[2 * s];
      if (e == 0) {
        return false;
      }
      if (e == k0) {
        long where = slots[2 * s + 1];
        if (len <= INLINE ? where == k1
            : (int) (where >>> 32) == len && Arrays.equals(arena, (int) where, (int) where + len, b, off, off + len)) {
          return true;
        }
      }
    }
  }

  /**
   * Probes many values at once, in blocks: first every key, then every first slot, then the
   * lookups. The slot loads of a block do not depend on each other, so the CPU overlaps their
   * cache misses instead of paying them one after another; the lookups then find them cached.
   */
  static final class Probe {
    private final Keys keys = new Keys();
    private long loaded; // keeps the slot loads from being optimised away

    /** How many of ``n`` values (``bytes[starts[i], +lens[i])``) are not in ``index``; counts each value's hash bucket in ``buckets`` (if given). */
    long misses(NodeIdIndex index, byte[] bytes, int[] starts, int[] lens, int n, int[] buckets) {
      long missing = 0;
      long[] slots = index.slots;
      int shift = index.shift;
      long[] hashes = keys.hash;
      for (int b = 0; b < n; b += Keys.BLOCK) {
        int m = Math.min(Keys.BLOCK, n - b);
        keys.fill(bytes, starts, lens, b, m);
        long any = 0;
        for (int j = 0; j < m; j++) {
          any |= slots[2 * (int) (hashes[j] >>> shift)];
        }
        if (index.arena.length > 0) { // ids in the arena: load the bytes of each first slot's id too
          for (int j = 0; j < m; j++) {
            int s = 2 * (int) (hashes[j] >>> shift);
            if (slots[s] == keys.k0[j] && (keys.k0[j] & 0xFF) == IN_ARENA) {
              any |= index.arena[(int) slots[s + 1]];
            }
          }
        }
        loaded |= any;
        for (int j = 0; j < m; j++) {
          long h = hashes[j];
          if (buckets != null) {
            buckets[(int) (h >>> 8) & (buckets.length - 1)]++;
          }
          if (!index.contains(bytes, starts[b + j], lens[b + j], h, keys.k0[j], keys.k1[j])) {
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

  /** Indexes built from the data since the JVM started (a reuse by content does not count). */
  static long builds() {
    return BUILDS.get();
  }

  /**
   * What rows a committed table holds, as a string: per fragment, its id, its data files' paths
   * and its deletion file. Data files are named by UUID and deletion files by fragment, read
   * version and a random id, and Lance never rewrites either, so two tables with equal keys hold
   * the same rows.
   */
  static String contentKey(String path, Dataset ds) {
    StringBuilder b = new StringBuilder(path);
    for (Fragment f : ds.getFragments()) {
      FragmentMetadata m = f.metadata();
      b.append('|').append(m.getId());
      for (DataFile d : m.getFiles()) {
        b.append(',').append(d.getPath()).append('@').append(d.getBaseId().map(String::valueOf).orElse(""));
      }
      DeletionFile del = m.getDeletionFile();
      if (del != null) {
        b.append(";del:").append(del.getFileType()).append('-').append(del.getReadVersion()).append('-')
            .append(del.getId()).append('@').append(del.getBaseId().map(String::valueOf).orElse(""));
      }
    }
    return b.toString();
  }

  private static NodeIdIndex build(JsonNode source, java.util.Map<String, String> storage) {
    long t0 = System.nanoTime();
    try (BufferAllocator allocator = new RootAllocator()) {
      JsonNode table = source.get("table");
      Dataset ds = null;
      if (table != null && !table.isNull()) {
        JsonNode branch = table.get("branch");
        ds = LanceSnapshotSource.openAt(allocator, table.get("path").asText(),
            branch == null || branch.isNull() ? null : branch.asText(), table.get("version").asLong(), storage);
      }
      List<LanceFileReader> files = new ArrayList<>();
      try {
        String content = ds != null && source.get("files").size() == 0
            ? contentKey(table.get("path").asText(), ds) : null;
        if (content != null) {
          synchronized (BY_CONTENT) {
            SoftReference<NodeIdIndex> ref = BY_CONTENT.get(content);
            NodeIdIndex hit = ref == null ? null : ref.get();
            if (hit != null) {
              LOG.info("reused the index of {} node ids for the endpoint check: {}", hit.size, source);
              return hit;
            }
          }
        }
        long rows = ds == null ? 0 : ds.countRows();
        for (JsonNode f : source.get("files")) {
          files.add(LanceFileReader.open(f.asText(), storage, allocator));
          rows += files.get(files.size() - 1).numRows();
        }
        Builder c = new Builder(rows);
        if (ds != null) {
          try (LanceScanner sc = LanceScanner.create(ds,
                   new ScanOptions.Builder().columns(Collections.singletonList("id")).batchSize(262_144).build(),
                   allocator);
               ArrowReader r = sc.scanBatches()) {
            c.addAll(r);
          }
        }
        for (LanceFileReader fr : files) {
          try (ArrowReader r = fr.readAll(Collections.singletonList("id"), null, 262_144)) {
            c.addAll(r);
          }
        }
        NodeIdIndex index = c.build();
        BUILDS.incrementAndGet();
        if (content != null) {
          synchronized (BY_CONTENT) {
            BY_CONTENT.put(content, new SoftReference<>(index));
          }
        }
        LOG.info("indexed {} node ids in {} ms for the endpoint check: {}", c.n,
            (System.nanoTime() - t0) / 1_000_000, source);
        return index;
      } finally {
        for (LanceFileReader fr : files) {
          fr.close();
        }
        if (ds != null) {
          ds.close();
        }
      }
    } catch (Exception e) {
      throw new IllegalStateException("cannot index the node ids of " + source, e);
    }
  }

  /** Inserts every non-null id of a stream into slots sized up front (its row count). */
  static final class Builder {
    final long[] slots;
    final int mask;
    final int shift;
    final int limit; // entries allowed: the table stays at most 3/4 full (a probe always ends)
    final Keys keys = new Keys();
    final double budget = HEAP_SHARE * Runtime.getRuntime().maxMemory(); // bytes of heap
    byte[] arena = new byte[0];
    int arenaEnd;
    int n;
    long loaded;

    Builder(long rows) {
      long cap = Long.highestOneBit(Math.max(2L, rows) * 2 - 1) << 1; // a power of two >= 2 * rows
      if (cap > (1 << 29) || 16.0 * cap > budget) {
        throw new IllegalStateException("too many node ids to index in this executor (" + rows + ")");
      }
      slots = new long[(int) (2 * cap)];
      mask = (int) cap - 1;
      shift = 64 - Long.numberOfTrailingZeros(cap);
      limit = (int) (cap / 4 * 3);
    }

    void addAll(ArrowReader r) throws IOException {
      while (r.loadNextBatch()) {
        add(new StringValues((VarCharVector) r.getVectorSchemaRoot().getVector("id")));
      }
    }

    void add(StringValues ids) {
      if (n + ids.n > limit) {
        throw new IllegalStateException("more node ids than the sources counted (" + (n + ids.n) + ")");
      }
      for (int i = 0; i < ids.n; i += Keys.BLOCK) {
        int m = Math.min(Keys.BLOCK, ids.n - i);
        keys.fill(ids.bytes, ids.starts, ids.lens, i, m);
        long any = 0; // the block's first slots, loaded together (see Probe)
        for (int j = 0; j < m; j++) {
          any |= slots[2 * (int) (keys.hash[j] >>> shift)];
        }
        loaded |= any;
        for (int j = 0; j < m; j++) {
          insert(ids.bytes, ids.starts[i + j], ids.lens[i + j], keys.hash[j], keys.k0[j], keys.k1[j]);
        }
      }
      n += ids.n;
    }

    NodeIdIndex build() {
      return new NodeIdIndex(slots, Arrays.copyOf(arena, arenaEnd), shift, mask, n);
    }

    private void insert(byte[] b, int off, int len, long h, long k0, long k1) {
      if (len > INLINE) {
        if (arenaEnd + len > arena.length) {
          long grown = Math.max((long) arenaEnd + len, 2L * arena.length + 1024);
          if (grown > Integer.MAX_VALUE - 16 || 8.0 * slots.length + grown > budget) {
            throw new IllegalStateException("node ids too long to index in this executor (" + n + "+)");
          }
          arena = Arrays.copyOf(arena, (int) grown);
        }
        System.arraycopy(b, off, arena, arenaEnd, len);
        k1 = (long) len << 32 | arenaEnd;
        arenaEnd += len;
      }
      int s = (int) (h >>> shift);
      while (slots[2 * s] != 0) {
        s = (s + 1) & mask;
      }
      slots[2 * s] = k0;
      slots[2 * s + 1] = k1;
    }
  }
}
