package io.omnigraph.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A node id index kept as a file: read back only whole, for exactly its rows key (invariant I15). */
class IdIndexFileTest {
  private static final double BUDGET = 1 << 30;
  private final NodeIdIndexTest indexes = new NodeIdIndexTest();

  @AfterEach
  void close() {
    indexes.close();
  }

  private static List<String> ids() {
    List<String> ids = new ArrayList<>();
    for (int i = 0; i < 300; i++) {
      ids.add(i % 3 == 0 ? "person-" + i : "a-node-id-longer-than-fifteen-bytes-" + i);
    }
    return ids;
  }

  @Test
  void anIndexReadsBackSlotForSlotAndFindsTheSameIds(@TempDir Path dir) {
    for (List<String> ids : List.of(ids(), Arrays.asList(Ulids.countUp(0x0191E3B7C3A07E1AL, 42, 300)))) {
      NodeIdIndex built = indexes.build(ids, 64);
      String key = "fragments=[0:data/a.lance,del:1-2.arrow];staged=[" + ids.get(0) + "]";
      IdIndexFile.write(dir, key, built);
      Path file = dir.resolve(IdIndexFile.name(key));
      assertTrue(Files.isRegularFile(file));
      NodeIdIndex read = IdIndexFile.read(dir, key, BUDGET);
      assertNotNull(read);
      assertEquals(built.ulids(), read.ulids());
      assertEquals(built.size(), read.size());
      assertEquals(built.capacity(), read.capacity());
      assertArrayEquals(built.slots(), read.slots());
      assertArrayEquals(built.arena(), read.arena());
      for (boolean h : indexes.hits(read, ids)) {
        assertTrue(h);
      }
      assertFalse(indexes.hits(read, List.of("person-1"))[0]);
    }
  }

  @Test
  void aFileIsNamedByTheSha256OfItsKey() {
    assertEquals("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.ids", IdIndexFile.name(""));
    assertEquals(64 + IdIndexFile.SUFFIX.length(), IdIndexFile.name("ä").length());
  }

  @Test
  void noFileOrAnotherKeysFileIsNoIndex(@TempDir Path dir) throws Exception {
    assertNull(IdIndexFile.read(dir, "k", BUDGET));
    IdIndexFile.write(dir, "k1", indexes.build(ids(), 100));
    Files.copy(dir.resolve(IdIndexFile.name("k1")), dir.resolve(IdIndexFile.name("k2")));
    assertNull(IdIndexFile.read(dir, "k2", BUDGET), "the file holds another rows key");
    assertFalse(Files.exists(dir.resolve(IdIndexFile.name("k2"))), "and is deleted");
    assertNotNull(IdIndexFile.read(dir, "k1", BUDGET));
  }

  @Test
  void aDamagedOrTruncatedFileIsDeletedAndNotUsed(@TempDir Path dir) throws Exception {
    NodeIdIndex index = indexes.build(ids(), 100);
    Path file = dir.resolve(IdIndexFile.name("k"));
    IdIndexFile.write(dir, "k", index);
    byte[] good = Files.readAllBytes(file);

    byte[] flipped = good.clone();
    flipped[good.length / 2] ^= 1; // one bit of the slots
    Files.write(file, flipped);
    assertNull(IdIndexFile.read(dir, "k", BUDGET), "checksum mismatch");
    assertFalse(Files.exists(file));

    Files.write(file, Arrays.copyOf(good, good.length - 8));
    assertNull(IdIndexFile.read(dir, "k", BUDGET), "bad sizes");
    assertFalse(Files.exists(file));

    byte[] magic = good.clone();
    magic[0] ^= 1;
    Files.write(file, magic);
    assertNull(IdIndexFile.read(dir, "k", BUDGET));
    assertFalse(Files.exists(file));

    Files.write(file, good);
    assertNotNull(IdIndexFile.read(dir, "k", BUDGET));
  }

  @Test
  void anIndexOverTheBudgetIsNotReadButKept(@TempDir Path dir) {
    IdIndexFile.write(dir, "k", indexes.build(ids(), 100));
    assertNull(IdIndexFile.read(dir, "k", 100));
    assertTrue(Files.exists(dir.resolve(IdIndexFile.name("k"))));
  }

  @Test
  void aKeptFileIsNeverOverwritten(@TempDir Path dir) throws Exception {
    IdIndexFile.write(dir, "k", indexes.build(ids(), 100));
    byte[] first = Files.readAllBytes(dir.resolve(IdIndexFile.name("k")));
    IdIndexFile.write(dir, "k", indexes.build(List.of("other"), 1));
    assertArrayEquals(first, Files.readAllBytes(dir.resolve(IdIndexFile.name("k"))));
  }

  @Test
  void aDirectoryKeepsTheMostRecentlyUsedFilesAndDropsStaleTemporaries(@TempDir Path dir) throws Exception {
    NodeIdIndex index = indexes.build(List.of("a", "b"), 2);
    long now = System.currentTimeMillis();
    for (int i = 0; i < IdIndexFile.MAX_FILES + 3; i++) {
      IdIndexFile.write(dir, "k" + i, index);
      Files.setLastModifiedTime(dir.resolve(IdIndexFile.name("k" + i)), FileTime.fromMillis(now - 1000L * (100 - i)));
    }
    Path stale = dir.resolve(".x.ids.1.tmp");
    Path fresh = dir.resolve(".y.ids.2.tmp");
    Files.write(stale, new byte[1], StandardOpenOption.CREATE_NEW);
    Files.write(fresh, new byte[1], StandardOpenOption.CREATE_NEW);
    Files.setLastModifiedTime(stale, FileTime.fromMillis(now - 2 * 3_600_000L));
    IdIndexFile.prune(dir);
    for (int i = 0; i < IdIndexFile.MAX_FILES + 3; i++) {
      assertEquals(i >= 3, Files.exists(dir.resolve(IdIndexFile.name("k" + i))), "k" + i);
    }
    assertFalse(Files.exists(stale), "a writer that died an hour ago");
    assertTrue(Files.exists(fresh), "a writer still writing");
  }
}
