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
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
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
 * <p>The build reads the table's fragments and the staged files as separate parts. One
 * background thread starts it, and every task that needs the index before it is done reads
 * unread parts instead of blocking ({@link Pending#join}): a task that has staged its rows holds
 * a core Spark gave it, so the build spreads over the executor's cores exactly when they would
 * otherwise wait.
 *
 * <p>Layout: open addressing over 16-byte slots (two longs, see {@link Keys}). An id of at most
 * 15 bytes lives in its slot, so a probe costs one cache miss; a longer id's slot holds 56 bits
 * of its hash and where its bytes are in an arena, compared byte for byte on a match. Why: past
 * a few million ids neither the slots nor the ids fit the CPU caches, and an arena read per
 * probe is a second cache miss, which made probes several times slower. The
 * table has {@link #SLOTS_PER_ID} slots per id (any count, not a power of two: a hash's slot is
 * its top 32 bits scaled to the table), so 12.5M ids take 320 MB rather than the 512 MB of the
 * next power of two above twice the ids.
 *
 * <p>ULID slots: when every id is a ULID as this package and the engine mint ids where none is
 * given (a node type without a key, edges; {@link Ulids#bits}), a slot holds the ULID's 128 bits
 * and nothing goes to the arena: one cache miss a probe instead of two, and 26 bytes less per id.
 * Which layout a build takes is decided by the first batch of ids it reads; a later id that is not such a ULID makes it start again with
 * the byte layout ({@link Builder#add}). A probe of a value that is not such a ULID then misses
 * without a look: no id of the table is one.
 */
final class NodeIdIndex {
  static {
    LanceDispatcherGuard.install(); // before this class's first Lance call (its javadoc)
  }

  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(NodeIdIndex.class);
  private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle SLOT = MethodHandles.arrayElementVarHandle(long[].class);
  /** slots per id: at most 5/8 of the slots are taken, so a probe for an absent id ends within a few slots */
  static final double SLOTS_PER_ID = 1.6;
  private static final int MAX_CACHED = 4;
  /** an index may take at most this share of the executor's heap (else: "not checked") */
  private static final double HEAP_SHARE = 0.25;
  /** ids up to this many bytes live in their slot */
  static final int INLINE = 15;
  /** the low byte of a slot's first word for an id kept in the arena (inline ids: length + 1) */
  private static final long IN_ARENA = 0xFF;
  /** load token + source JSON -> the index being built or built; guarded by itself */
  private static final Map<String, SoftReference<Pending>> CACHE = recentlyUsed();
  /** a source's rows key (see {@link #rowsKey}) -> its index, across loads; guarded by itself */
  private static final Map<String, SoftReference<NodeIdIndex>> BY_CONTENT = recentlyUsed();
  /** threads writing an {@link IdIndexFile}; guarded by itself */
  private static final List<Thread> KEEPING = new ArrayList<>();
  /** whether the exit hook that waits for {@link #KEEPING} is registered */
  private static final java.util.concurrent.atomic.AtomicBoolean KEEP_HOOK = new java.util.concurrent.atomic.AtomicBoolean();
  /** how long a JVM that exits waits for its index files */
  private static final long KEEP_WAIT_MILLIS = 60_000;
  /** indexes built from the data (not taken from {@link #BY_CONTENT}), for tests */
  private static final AtomicLong BUILDS = new AtomicLong();
  /** of those, the ones with ULID slots, for tests */
  private static final AtomicLong ULID_BUILDS = new AtomicLong();
  /** builds with ULID slots that met another id and started again with bytes, for tests */
  private static final AtomicLong AGAIN_AS_BYTES = new AtomicLong();

  private final long[] slots; // slot i: words 2i, 2i + 1; first word 0 = empty
  private final byte[] arena; // the bytes of the ids longer than INLINE, back to back
  private final int cap; // slots; linear probing wraps from the last to the first
  private final int size; // ids in the set
  private final boolean ulids; // every id a minted ULID, its slot its 128 bits (see the class comment)

  private NodeIdIndex(long[] slots, byte[] arena, int cap, int size, boolean ulids) {
    this.slots = slots;
    this.size = size;
    this.arena = arena;
    this.cap = cap;
    this.ulids = ulids;
  }

  /** An index read back from its {@link IdIndexFile} (the file's checksum vouches for the slots). */
  static NodeIdIndex restored(long[] slots, byte[] arena, int cap, int size, boolean ulids) {
    return new NodeIdIndex(slots, arena, cap, size, ulids);
  }

  boolean ulids() {
    return ulids;
  }

  long[] slots() {
    return slots;
  }

  byte[] arena() {
    return arena;
  }

  int capacity() {
    return cap;
  }

  int size() {
    return size;
  }

  /** The first slot of hash {@code h} in a table of {@code cap} slots: its top 32 bits scaled to the table. */
  static int home(long h, int cap) {
    return (int) (((h >>> 32) * cap) >>> 32);
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
    long loaded; // keeps a block's slot loads from being optimised away

    /**
     * Keys of the ids ``bytes[starts[from + j], +lens[from + j])``, j < m, into slots 0..m-1, in
     * the layout of an index of ULID slots ({@code ulids}) or of bytes. With ULID slots, a value
     * that is not a minted ULID gets the key 0, which no slot holds.
     */
    void fill(byte[] bytes, int[] starts, int[] lens, int from, int m, boolean ulids) {
      if (ulids) {
        for (int j = 0; j < m; j++) {
          if (ulidBits(bytes, starts[from + j], lens[from + j], k0, k1, j)) {
            hash[j] = mix(k0[j], k1[j]);
          } else {
            hash[j] = 0;
            k0[j] = 0;
            k1[j] = 0;
          }
        }
        return;
      }
      for (int j = 0; j < m; j++) {
        int off = starts[from + j];
        int len = lens[from + j];
        if (len <= INLINE) {
          long w0 = bytesAt(bytes, off, Math.min(len, 7)) << 8 | (len + 1);
          long w1 = len <= 7 ? 0 : bytesAt(bytes, off + 7, len - 7);
          hash[j] = mix(w0, w1);
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

  /** A 64-bit hash of a slot's two words. */
  private static long mix(long w0, long w1) {
    long h = (w0 ^ 0x9E3779B97F4A7C15L) * 0xBF58476D1CE4E5B9L;
    h = (h ^ (h >>> 31) ^ w1) * 0x94D049BB133111EBL;
    h ^= h >>> 29;
    h *= 0xBF58476D1CE4E5B9L;
    return h ^ (h >>> 32);
  }

  /**
   * Whether ``b[off, off + len)`` is a minted ULID ({@link Ulids#bits}) whose high word is not 0
   * (0 marks an empty slot); if so its words are in ``hi[j]``, ``lo[j]``.
   */
  static boolean ulidBits(byte[] b, int off, int len, long[] hi, long[] lo, int j) {
    return Ulids.bits(b, off, len, hi, lo, j) && hi[j] != 0;
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
  static Pending of(String load, JsonNode source, java.util.Map<String, String> storage) {
    return of(load, source, storage, null);
  }

  /**
   * As {@link #of(String, JsonNode, java.util.Map)}, reading and keeping the index as an {@link
   * IdIndexFile} where {@code kept} says (null: nowhere).
   */
  static Pending of(String load, JsonNode source, java.util.Map<String, String> storage, Kept kept) {
    String key = load + " " + source;
    synchronized (CACHE) {
      SoftReference<Pending> ref = CACHE.get(key);
      Pending f = ref == null ? null : ref.get();
      if (f == null || f.failed()) {
        f = new Pending(source, storage, kept);
        CACHE.put(key, new SoftReference<>(f));
      }
      return f;
    }
  }

  /**
   * An index being built or built. A background thread opens the sources, sizes the table and
   * reads parts; {@link #join} reads unread parts too before it waits for the rest.
   */
  static final class Pending {
    private final CompletableFuture<Build> started = new CompletableFuture<>();
    private final CompletableFuture<NodeIdIndex> done = new CompletableFuture<>();

    private Pending(JsonNode source, java.util.Map<String, String> storage, Kept kept) {
      CompletableFuture.runAsync(() -> {
        Build b;
        try {
          b = Build.start(source, storage, kept, done, Builder.UNDECIDED);
        } catch (Throwable t) {
          started.completeExceptionally(t);
          done.completeExceptionally(t);
          return;
        }
        started.complete(b);
        if (b != null) {
          b.help();
        }
      });
    }

    boolean isDone() {
      return done.isDone();
    }

    boolean failed() {
      return done.isCompletedExceptionally();
    }

    /** The index, once built; helps build it meanwhile. Throws (unchecked) if it cannot be built. */
    NodeIdIndex join() {
      Build b;
      try {
        b = started.join();
      } catch (CompletionException e) {
        return done.join(); // throws the build's failure
      }
      for (; b != null; b = b.next) { // a build that started again with bytes (Builder#add) names its successor
        b.help();
      }
      return done.join();
    }
  }

  /** Is the id ``b[off, off + len)`` (hash {@code h}, key words k0, k1) in the set? Linear probing. */
  private boolean contains(byte[] b, int off, int len, long h, long k0, long k1) {
    if (k0 == 0) { // with ULID slots: not a minted ULID, so no id of this table
      return false;
    }
    for (int s = home(h, cap); ; s = s + 1 == cap ? 0 : s + 1) {
      long e = slots[2 * s];
      if (e == 0) {
        return false;
      }
      if (e == k0) {
        long where = slots[2 * s + 1];
        if (ulids || len <= INLINE ? where == k1
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

    /** How many of ``n`` values (``bytes[starts[i], +lens[i])``) are not in ``index``; counts each value's hash bucket in ``buckets`` (if given). */
    long misses(NodeIdIndex index, byte[] bytes, int[] starts, int[] lens, int n, int[] buckets) {
      return probe(index, bytes, starts, lens, n, buckets, null);
    }

    /** Sets ``hit[i]`` to whether value i (``bytes[starts[i], +lens[i])``, i < n) is in ``index``. */
    void hits(NodeIdIndex index, byte[] bytes, int[] starts, int[] lens, int n, boolean[] hit) {
      probe(index, bytes, starts, lens, n, null, hit);
    }

    private long probe(NodeIdIndex index, byte[] bytes, int[] starts, int[] lens, int n, int[] buckets, boolean[] hit) {
      long missing = 0;
      long[] slots = index.slots;
      int cap = index.cap;
      long[] hashes = keys.hash;
      for (int b = 0; b < n; b += Keys.BLOCK) {
        int m = Math.min(Keys.BLOCK, n - b);
        keys.fill(bytes, starts, lens, b, m, index.ulids);
        long any = 0;
        for (int j = 0; j < m; j++) {
          any |= slots[2 * home(hashes[j], cap)];
        }
        if (index.arena.length > 0) { // ids in the arena: load the bytes of each first slot's id too
          for (int j = 0; j < m; j++) {
            int s = 2 * home(hashes[j], cap);
            if (slots[s] == keys.k0[j] && (keys.k0[j] & 0xFF) == IN_ARENA) {
              any |= index.arena[(int) slots[s + 1]];
            }
          }
        }
        keys.loaded |= any;
        for (int j = 0; j < m; j++) {
          long h = hashes[j];
          if (buckets != null) {
            buckets[(int) (h >>> 8) & (buckets.length - 1)]++;
          }
          boolean in = index.contains(bytes, starts[b + j], lens[b + j], h, keys.k0[j], keys.k1[j]);
          if (hit != null) {
            hit[b + j] = in;
          }
          if (!in) {
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

  /** The bytes of heap an index may take in this JVM (built or read from its file). */
  static double heapBudget() {
    return HEAP_SHARE * Runtime.getRuntime().maxMemory();
  }

  /** Forgets the indexes kept in memory across loads, as a fresh JVM starts (tests). */
  static void forgetKept() {
    synchronized (BY_CONTENT) {
      BY_CONTENT.clear();
    }
  }

  /** Indexes built from the data since the JVM started (a reuse by content does not count). */
  static long builds() {
    return BUILDS.get();
  }

  /** Of {@link #builds}, those with ULID slots. */
  static long ulidBuilds() {
    return ULID_BUILDS.get();
  }

  /** Builds with ULID slots that met an id of another kind and started again with bytes. */
  static long againAsBytes() {
    return AGAIN_AS_BYTES.get();
  }

  /**
   * Which rows a source's ids come from, as a string: one entry per committed fragment (the
   * names of its data files and its deletion file, if any) and per staged data file (its name),
   * sorted. Lance names data files by UUID and deletion files by fragment, read version and a
   * random id, and never rewrites either, so two sources with equal keys hold the same ids; a
   * load's staged files, once committed as they are, have the key they had staged. Keys the
   * indexes kept in memory ({@link #BY_CONTENT}) and on disk ({@link IdIndexFile}).
   */
  static String rowsKey(Dataset ds, JsonNode files) {
    List<String> entries = new ArrayList<>();
    if (ds != null) {
      for (Fragment f : ds.getFragments()) {
        FragmentMetadata m = f.metadata();
        StringBuilder b = new StringBuilder();
        for (DataFile d : m.getFiles()) {
          b.append(b.length() == 0 ? "" : ",").append(fileName(d.getPath()));
        }
        DeletionFile del = m.getDeletionFile();
        if (del != null) {
          b.append(" deleted:").append(m.getId()).append('-').append(del.getReadVersion()).append('-')
              .append(del.getId()).append('.').append(del.getFileType());
        }
        entries.add(b.toString());
      }
    }
    for (JsonNode f : files) {
      entries.add(fileName(f.asText()));
    }
    Collections.sort(entries);
    return "node ids v1\n" + String.join("\n", entries);
  }

  private static String fileName(String path) {
    return path.substring(path.lastIndexOf('/') + 1);
  }

  /**
   * One build: the table being filled and the parts still to read (a committed fragment, a
   * staged file). The sources are opened once, in {@link #start}: the parts scan the one
   * committed table (Lance's {@code Dataset} takes concurrent scans) and read the staged files
   * through the readers that counted their rows. Any thread may read parts ({@link #help}); the
   * one that finishes the last part completes the index and closes the sources.
   */
  private static final class Build {
    private final JsonNode source;
    private final java.util.Map<String, String> storage;
    private final BufferAllocator allocator;
    private final Dataset table; // the committed table at its pinned version; null: none
    private Builder ids; // null once this build gave way to one with bytes (see next)
    private final String content; // the source's rows key (see rowsKey)
    private final Kept kept; // where to keep the index on disk (null: nowhere)
    private final ConcurrentLinkedQueue<Part> parts;
    private final int count; // parts in all
    private final AtomicInteger unread;
    private final AtomicInteger readers = new AtomicInteger(); // threads that read at least one part
    private final CompletableFuture<NodeIdIndex> done;
    private final long t0;
    /** a part met an id that is not a minted ULID in a table of ULID slots */
    private volatile boolean notUlids;
    /** the build with bytes that replaced this one (after {@link #notUlids}); null: none */
    volatile Build next;

    private Build(JsonNode source, java.util.Map<String, String> storage, BufferAllocator allocator, Dataset table,
        Builder ids, String content, Kept kept, List<Part> parts, CompletableFuture<NodeIdIndex> done, long t0) {
      this.source = source;
      this.storage = storage;
      this.allocator = allocator;
      this.table = table;
      this.ids = ids;
      this.content = content;
      this.kept = kept;
      this.parts = new ConcurrentLinkedQueue<>(parts);
      this.count = parts.size();
      this.unread = new AtomicInteger(parts.size());
      this.done = done;
      this.t0 = t0;
    }

    /**
     * Opens the sources, counts their rows and sizes the table ({@code layout}: see {@link
     * Builder}). Returns null when {@code done} is already complete (an index of the same rows
     * was reused from memory or read from {@code kept}, or there is nothing to read).
     */
    static Build start(JsonNode source, java.util.Map<String, String> storage, Kept kept,
        CompletableFuture<NodeIdIndex> done, int layout) {
      long t0 = System.nanoTime();
      BufferAllocator allocator = new RootAllocator();
      Dataset ds = null;
      List<Part> parts = new ArrayList<>();
      Build b = null;
      try {
        long rows = 0;
        JsonNode table = source.get("table");
        if (table != null && !table.isNull()) {
          JsonNode branch = table.get("branch");
          ds = LanceSnapshotSource.openAt(allocator, table.get("path").asText(),
              branch == null || branch.isNull() ? null : branch.asText(), table.get("version").asLong(), storage);
        }
        String content = rowsKey(ds, source.get("files"));
        NodeIdIndex hit = reusable(content);
        if (hit != null) {
          LOG.info("reused the index of {} node ids for the endpoint check: {}", hit.size, source);
          done.complete(hit);
          return null;
        }
        hit = kept == null ? null : IdIndexFile.read(kept.dir, content, heapBudget());
        if (hit != null) {
          remember(content, hit);
          done.complete(hit);
          return null;
        }
        if (ds != null) {
          for (Fragment f : ds.getFragments()) {
            rows += f.countRows();
            parts.add(new Part(f.getId(), null));
          }
        }
        for (JsonNode f : source.get("files")) {
          LanceFileReader r = LanceFileReader.open(f.asText(), storage, allocator);
          parts.add(new Part(-1, r));
          rows += r.numRows();
        }
        b = new Build(source, storage, allocator, ds, new Builder(rows, layout), content, kept, parts, done, t0);
        if (parts.isEmpty()) {
          b.finish();
          return null;
        }
        return b;
      } catch (Exception e) {
        throw new IllegalStateException("cannot index the node ids of " + source, e);
      } finally {
        if (b == null) {
          for (Part p : parts) {
            p.close();
          }
          if (ds != null) {
            ds.close();
          }
          allocator.close();
        }
      }
    }

    /** Reads unread parts until none is left; the thread reading the last one completes the index. */
    void help() {
      boolean counted = false;
      for (Part p = parts.poll(); p != null; p = parts.poll()) {
        if (!counted) {
          readers.incrementAndGet();
          counted = true;
        }
        try {
          if (!done.isDone() && !notUlids) {
            p.read(this);
          }
        } catch (NotUlids e) {
          notUlids = true;
        } catch (Throwable t) {
          done.completeExceptionally(new IllegalStateException("cannot index the node ids of " + source, t));
        } finally {
          p.close();
          if (unread.decrementAndGet() == 0) {
            finish();
          }
        }
      }
    }

    private void finish() {
      if (notUlids && !done.isDone()) {
        again();
        return;
      }
      try {
        if (!done.isDone()) {
          NodeIdIndex index = ids.build();
          BUILDS.incrementAndGet();
          if (index.ulids) {
            ULID_BUILDS.incrementAndGet();
          }
          remember(content, index);
          LOG.info("indexed {} node ids in {} ms ({} parts read by {} threads, {}) for the endpoint check: {}",
              index.size, (System.nanoTime() - t0) / 1_000_000, count, readers.get(),
              index.ulids ? "ULID slots" : "bytes", source);
          done.complete(index);
          if (kept != null && index.size >= kept.minIds) {
            keepLater(kept.dir, content, index);
          }
        }
      } catch (Throwable t) {
        done.completeExceptionally(new IllegalStateException("cannot index the node ids of " + source, t));
      } finally {
        if (table != null) {
          table.close();
        }
        allocator.close();
      }
    }

    /**
     * This build met an id that is not a minted ULID: it closes its sources and drops its table,
     * and a build with bytes reads every part again (helped by the threads that wait, {@link
     * Pending#join}).
     */
    private void again() {
      ids = null;
      if (table != null) {
        table.close();
      }
      allocator.close();
      AGAIN_AS_BYTES.incrementAndGet();
      LOG.info("node ids not all minted ULIDs: indexing them again as bytes: {}", source);
      Build b;
      try {
        b = start(source, storage, kept, done, Builder.BYTES);
      } catch (Throwable t) {
        done.completeExceptionally(t);
        return;
      }
      next = b;
      if (b != null) {
        b.help();
      }
    }
  }

  /** A committed fragment (its id) or a staged data file (its open reader) of the ids being indexed. */
  private static final class Part {
    private final int fragment;
    private final LanceFileReader file; // null: a fragment of the build's table

    Part(int fragment, LanceFileReader file) {
      this.fragment = fragment;
      this.file = file;
    }

    void read(Build b) throws Exception {
      Keys keys = new Keys();
      if (file != null) {
        try (ArrowReader r = file.readAll(Collections.singletonList("id"), null, 262_144)) {
          b.ids.addAll(r, keys);
        }
        return;
      }
      try (BufferAllocator a = b.allocator.newChildAllocator("node-ids", 0, Long.MAX_VALUE);
           LanceScanner sc = LanceScanner.create(b.table, new ScanOptions.Builder()
               .columns(Collections.singletonList("id")).fragmentIds(List.of(fragment)).batchSize(262_144).build(), a);
           ArrowReader r = sc.scanBatches()) {
        b.ids.addAll(r, keys);
      }
    }

    /** Closes the staged file's reader (read or not). */
    void close() {
      if (file != null) {
        try {
          file.close();
        } catch (Exception e) {
          LOG.debug("closing a staged node file's reader: {}", e.toString());
        }
      }
    }
  }

  /** Why a build failed, for a log line: each cause's message, outermost first. */
  static String cause(Throwable e) {
    StringBuilder b = new StringBuilder();
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (!(t instanceof CompletionException)) {
        b.append(b.length() == 0 ? "" : ": caused by ").append(t);
      }
    }
    return b.toString();
  }

  private static void remember(String content, NodeIdIndex index) {
    synchronized (BY_CONTENT) {
      BY_CONTENT.put(content, new SoftReference<>(index));
    }
  }

  /**
   * Writes the index to its {@link IdIndexFile} in a thread of its own, so that no task waits
   * for the disk. A JVM that exits meanwhile (a PySpark driver's JVM exits when its Python
   * process does) first lets the file finish, for up to {@link #KEEP_WAIT_MILLIS}; a killed one
   * leaves a temporary file the next write deletes.
   */
  private static void keepLater(java.nio.file.Path dir, String content, NodeIdIndex index) {
    Thread t = new Thread(() -> IdIndexFile.write(dir, content, index), "omnigraph-keep-id-index");
    if (!KEEP_HOOK.getAndSet(true)) {
      try {
        Runtime.getRuntime().addShutdownHook(new Thread(NodeIdIndex::finishKeeping, "omnigraph-keep-id-index-exit"));
      } catch (IllegalStateException e) { // the JVM is exiting already: keep nothing
        return;
      }
    }
    synchronized (KEEPING) {
      KEEPING.removeIf(k -> !k.isAlive());
      KEEPING.add(t);
    }
    t.start();
  }

  /** At JVM exit: waits for the index files being written. */
  private static void finishKeeping() {
    long deadline = System.currentTimeMillis() + KEEP_WAIT_MILLIS;
    List<Thread> threads;
    synchronized (KEEPING) {
      threads = new ArrayList<>(KEEPING);
    }
    for (Thread t : threads) {
      try {
        t.join(Math.max(1, deadline - System.currentTimeMillis()));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  /** Where a source's index is kept on disk: a local directory, for indexes of at least {@code minIds} ids. */
  static final class Kept {
    final java.nio.file.Path dir;
    final long minIds;

    Kept(java.nio.file.Path dir, long minIds) {
      this.dir = dir;
      this.minIds = minIds;
    }

    /** From the checks' spec field {"dir": path, "minIds": n}; null: absent. */
    static Kept of(JsonNode spec) {
      return spec == null || spec.isNull() ? null
          : new Kept(java.nio.file.Paths.get(spec.get("dir").asText()), spec.get("minIds").asLong());
    }
  }

  /** A build with ULID slots met an id that is not a minted ULID: it starts again with bytes. */
  static final class NotUlids extends RuntimeException {
    NotUlids() {
      super("an id that is not a minted ULID", null, false, false);
    }
  }

  /** An index built earlier from the same rows, if the GC has not reclaimed it. */
  private static NodeIdIndex reusable(String content) {
    synchronized (BY_CONTENT) {
      SoftReference<NodeIdIndex> ref = BY_CONTENT.get(content);
      return ref == null ? null : ref.get();
    }
  }

  /**
   * Inserts every non-null id of the parts into slots sized up front (their row count). Any
   * number of threads may add at once: a slot is taken by a compare-and-set of its first word,
   * and the arena grows under a lock. Nothing reads the table until the build completes.
   */
  static final class Builder {
    /** the layout of the slots: not decided yet, ULID slots, or bytes (see the class comment) */
    static final int UNDECIDED = 0;
    static final int ULIDS = 1;
    static final int BYTES = 2;

    final long[] slots;
    final int cap;
    final int limit; // entries allowed: the table stays at most 3/4 full (a probe always ends)
    final double budget = heapBudget();
    final AtomicInteger n = new AtomicInteger();
    final AtomicInteger layout;
    private byte[] arena = new byte[0]; // guarded by this
    private int arenaEnd; // guarded by this

    /** A table for {@code rows} ids in {@code layout} ({@link #UNDECIDED}: the first ids added decide). */
    Builder(long rows, int layout) {
      this.layout = new AtomicInteger(layout);
      long want = Math.max(2L, (long) Math.ceil(rows * SLOTS_PER_ID));
      if (want > (1 << 30) - 16 || 16.0 * want > budget) {
        throw new IllegalStateException("too many node ids to index in this executor (" + rows + ")");
      }
      cap = (int) want;
      slots = new long[2 * cap];
      limit = (int) (cap * 3L / 4);
    }

    void addAll(ArrowReader r, Keys keys) throws IOException {
      while (r.loadNextBatch()) {
        add(new StringValues((VarCharVector) r.getVectorSchemaRoot().getVector("id")), keys);
      }
    }

    /**
     * Inserts one batch of ids. The first batch with an id decides the layout: ULID slots if all
     * of its ids are minted ULIDs, else bytes. With ULID slots, an id that is not one throws
     * {@link NotUlids} (the build starts again with bytes).
     */
    void add(StringValues ids, Keys keys) {
      if (ids.n == 0) {
        return;
      }
      if (layout.get() == UNDECIDED) {
        layout.compareAndSet(UNDECIDED, allUlids(ids, keys) ? ULIDS : BYTES);
      }
      boolean ulids = layout.get() == ULIDS;
      if (n.addAndGet(ids.n) > limit) {
        throw new IllegalStateException("more node ids than the sources counted (" + n.get() + ")");
      }
      for (int i = 0; i < ids.n; i += Keys.BLOCK) {
        int m = Math.min(Keys.BLOCK, ids.n - i);
        keys.fill(ids.bytes, ids.starts, ids.lens, i, m, ulids);
        if (ulids) {
          for (int j = 0; j < m; j++) {
            if (keys.k0[j] == 0) {
              throw new NotUlids();
            }
          }
        }
        long any = 0; // the block's first slots, loaded together (see Probe)
        for (int j = 0; j < m; j++) {
          any |= slots[2 * home(keys.hash[j], cap)];
        }
        keys.loaded |= any;
        for (int j = 0; j < m; j++) {
          insert(ids.bytes, ids.starts[i + j], ids.lens[i + j], keys.hash[j], keys.k0[j], keys.k1[j], ulids);
        }
      }
    }

    private static boolean allUlids(StringValues ids, Keys keys) {
      for (int i = 0; i < ids.n; i++) {
        if (!ulidBits(ids.bytes, ids.starts[i], ids.lens[i], keys.k0, keys.k1, 0)) {
          return false;
        }
      }
      return true;
    }

    /** The finished index; call once, after every part is read (the last part's thread does). */
    synchronized NodeIdIndex build() {
      byte[] ids = arenaEnd == arena.length ? arena : Arrays.copyOf(arena, arenaEnd);
      arena = null; // the index holds the bytes now (this builder stays reachable while the index is cached)
      return new NodeIdIndex(slots, ids, cap, n.get(), layout.get() == ULIDS);
    }

    private void insert(byte[] b, int off, int len, long h, long k0, long k1, boolean ulids) {
      if (len > INLINE && !ulids) {
        k1 = toArena(b, off, len);
      }
      int s = home(h, cap);
      while (slots[2 * s] != 0 || !SLOT.compareAndSet(slots, 2 * s, 0L, k0)) {
        s = s + 1 == cap ? 0 : s + 1;
      }
      slots[2 * s + 1] = k1;
    }

    /** Copies an id into the arena; returns its slot's second word (length, offset). */
    private synchronized long toArena(byte[] b, int off, int len) {
      if (arenaEnd + len > arena.length) {
        long grown = Math.max((long) arenaEnd + len, 2L * arena.length + 1024);
        if (grown > Integer.MAX_VALUE - 16 || 8.0 * slots.length + grown > budget) {
          throw new IllegalStateException("node ids too long to index in this executor (" + n.get() + "+)");
        }
        arena = Arrays.copyOf(arena, (int) grown);
      }
      System.arraycopy(b, off, arena, arenaEnd, len);
      long where = (long) len << 32 | arenaEnd;
      arenaEnd += len;
      return where;
    }
  }
}
