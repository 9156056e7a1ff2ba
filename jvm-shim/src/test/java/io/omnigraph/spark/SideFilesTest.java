package io.omnigraph.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Where the side files go and what a local one holds: as the Python driver reads them (spec/side_files.json). */
class SideFilesTest {
  private static final JsonNode SPEC = Spec.load("side_files.json");

  @Test
  void aSideFileIsWhereThePythonDriverLooks() {
    for (JsonNode c : SPEC.get("locations")) {
      assertEquals(c.get("location").asText(),
          SideFiles.name(c.get("dir").asText(), c.get("base").asText(), c.get("ext").asText()), c.toString());
    }
    assertTrue(SideFiles.remote("s3://b/g"));
    assertTrue(SideFiles.remote("az://c/g"));
    assertFalse(SideFiles.remote("/tmp/g"));
    assertFalse(SideFiles.remote("relative/g"));
  }

  @Test
  void aLocalFingerprintFileIsItsValuesLittleEndian(@TempDir Path dir) throws Exception {
    JsonNode f = SPEC.get("fingerprints");
    long[] values = new long[f.get("values").size() + 3];
    for (int i = 0; i < f.get("values").size(); i++) {
      values[i] = Spec.hex64(f.get("values").get(i));
    }
    values[values.length - 1] = 42; // past n: not written
    Path p = dir.resolve("keys-p0-a0.bin");
    SideFiles.writeLongs(p.toString(), values, f.get("values").size(), Collections.emptyMap());
    assertArrayEquals(HexFormat.of().parseHex(f.get("bytes").asText()), Files.readAllBytes(p));
    try (var names = Files.list(dir)) {
      assertEquals(1, names.count(), "no temporary file left beside it");
    }
  }

  @Test
  void aLocalTextFileIsItsUtf8(@TempDir Path dir) throws Exception {
    Path p = dir.resolve("journal").resolve("task-0.json");
    String text = "{\"files\": [\"ä.lance\"]}";
    SideFiles.writeText(p.toString(), text, Collections.emptyMap());
    assertEquals(text, Files.readString(p, StandardCharsets.UTF_8));
    SideFiles.writeText(p.toString(), "{}", Collections.emptyMap()); // replaced whole
    assertEquals("{}", Files.readString(p, StandardCharsets.UTF_8));
  }
}
