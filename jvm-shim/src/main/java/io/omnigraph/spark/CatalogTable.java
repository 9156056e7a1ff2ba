package io.omnigraph.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.LocalDate;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.SupportsDelete;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsRowLevelOperations;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.RowLevelOperationBuilder;
import org.apache.spark.sql.connector.write.RowLevelOperationInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.sources.AlwaysFalse;
import org.apache.spark.sql.sources.AlwaysTrue;
import org.apache.spark.sql.sources.And;
import org.apache.spark.sql.sources.EqualNullSafe;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.Not;
import org.apache.spark.sql.sources.Or;
import org.apache.spark.sql.sources.StringContains;
import org.apache.spark.sql.sources.StringEndsWith;
import org.apache.spark.sql.sources.StringStartsWith;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.MetadataBuilder;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * One node or edge type as a catalog table ({@link OmnigraphCatalog}): the provider's table
 * ({@link OmnigraphProvider}) for the options the planner answered (path, type, branch, a
 * version), so a SELECT is the provider's read (its pushdown, its snapshot) and an INSERT its
 * write (ONE graph commit with the DataFrame API's checks). What this adds: the name, the
 * column comments and table properties DESCRIBE shows, the options a statement or reader gives
 * (merged over the table's; {@code path} and {@code type} are the identifier's), writes whose
 * columns are matched by name ({@code ACCEPT_ANY_SCHEMA}: the planner checks them, as for a
 * DataFrame write), {@code DELETE FROM ... WHERE}, which the planner runs
 * ({@code delete_where}), and {@code UPDATE} / {@code MERGE INTO} (and a {@code DELETE} whose
 * condition is no data source filter) as Spark's row-level operations ({@link CatalogRowLevel}).
 * Runs on the driver.
 */
final class CatalogTable implements SupportsRead, SupportsWrite, SupportsDelete, SupportsRowLevelOperations {
  /** Options the identifier fixes: a statement's or reader's options may not name them. */
  private static final Set<String> FIXED = Set.of("path", "type");

  private final OmnigraphCatalog catalog;
  private final Identifier ident;
  private final Map<String, String> options; // the provider's: path, type, branch, storage.*, a version
  private final boolean pinned; // VERSION / TIMESTAMP AS OF: read only
  private final StructType readSchema; // the provider's schema for these options
  private final StructType schema; // readSchema with the column comments
  private final Map<String, String> properties;
  private final Table inner;
  // loaded for a statement that updates rows (UPDATE, MERGE with an UPDATE clause): no
  // ACCEPT_ANY_SCHEMA, which would keep Spark from aligning the statement's assignments to the columns
  private final boolean updates;

  private CatalogTable(OmnigraphCatalog catalog, Identifier ident, Map<String, String> options, boolean pinned,
      StructType readSchema, StructType schema, Map<String, String> properties, Table inner, boolean updates) {
    this.catalog = catalog;
    this.ident = ident;
    this.options = options;
    this.pinned = pinned;
    this.readSchema = readSchema;
    this.schema = schema;
    this.properties = properties;
    this.inner = inner;
    this.updates = updates;
  }

  /** This table as an UPDATE or a MERGE with an UPDATE clause loads it ({@link OmnigraphCatalog#loadTable}). */
  CatalogTable forUpdates() {
    // id defaults to '': a MERGE's INSERT clause may leave it out (Spark fills the default; the
    // row id must stay non-nullable), and the tasks hand the sink a null for it, which derives it
    // from @key or mints a fresh one, as for an INSERT INTO (CatalogRowLevel.Writer#insert)
    StructField[] fields = schema.fields().clone();
    for (int i = 0; i < fields.length; i++) {
      if ("id".equals(fields[i].name())) {
        Metadata meta = new MetadataBuilder().withMetadata(fields[i].metadata())
            .putString("CURRENT_DEFAULT", "''").putString("EXISTS_DEFAULT", "''").build();
        fields[i] = new StructField("id", fields[i].dataType(), fields[i].nullable(), meta);
      }
    }
    return new CatalogTable(catalog, ident, options, pinned, readSchema, new StructType(fields), properties, inner,
        true);
  }

  /** The table the planner's {@code table} answer describes. */
  static CatalogTable of(OmnigraphCatalog catalog, Identifier ident, JsonNode answer, boolean pinned) {
    Map<String, String> options = strings(answer.get("options"));
    OmnigraphProvider provider = new OmnigraphProvider();
    StructType read = provider.inferSchema(new CaseInsensitiveStringMap(options));
    Table inner = provider.getTable(read, new Transform[0], options);
    JsonNode comments = answer.get("comments");
    StructField[] fields = read.fields().clone();
    for (int i = 0; i < fields.length; i++) {
      StructField f = fields[i];
      Metadata meta = f.metadata();
      if (comments.hasNonNull(f.name())) {
        meta = new MetadataBuilder().withMetadata(meta).putString("comment", comments.get(f.name()).asText()).build();
      }
      fields[i] = new StructField(f.name(), f.dataType(), f.nullable(), meta);
    }
    Map<String, String> props = strings(answer.get("properties"));
    props.put("provider", OmnigraphProvider.NAME);
    return new CatalogTable(catalog, ident, options, pinned, read, new StructType(fields), props, inner, false);
  }

  private static Map<String, String> strings(JsonNode object) {
    Map<String, String> out = new HashMap<>();
    object.fields().forEachRemaining(e -> out.put(e.getKey(), e.getValue().asText()));
    return out;
  }

  @Override
  public String name() {
    return catalog.name() + "." + ident.toString();
  }

  @SuppressWarnings("deprecation")
  @Override
  public StructType schema() {
    return schema;
  }

  @Override
  public Map<String, String> properties() {
    return properties;
  }

  @Override
  public Set<TableCapability> capabilities() {
    if (updates) {
      return EnumSet.of(TableCapability.BATCH_READ, TableCapability.BATCH_WRITE, TableCapability.TRUNCATE);
    }
    return EnumSet.of(TableCapability.BATCH_READ, TableCapability.BATCH_WRITE, TableCapability.TRUNCATE,
        TableCapability.ACCEPT_ANY_SCHEMA);
  }

  /** The table's options with a statement's or reader's over them ({@code path}/{@code type} refused). */
  private Map<String, String> merged(CaseInsensitiveStringMap given) {
    Map<String, String> out = new HashMap<>(options);
    for (Map.Entry<String, String> e : given.asCaseSensitiveMap().entrySet()) {
      if (FIXED.contains(e.getKey().toLowerCase(java.util.Locale.ROOT))) {
        throw new PythonBridge.OmnigraphException(ErrorCodes.OPTION_INVALID, "OptionError: [" + ErrorCodes.OPTION_INVALID + "] option '"
            + e.getKey() + "' is fixed by the table identifier " + name() + " (" + e.getKey() + " = "
            + options.get(e.getKey().toLowerCase(java.util.Locale.ROOT)) + ")");
      }
      out.put(e.getKey(), e.getValue());
    }
    return out;
  }

  /**
   * The provider's scan; a reader's or statement's own options (a branch, a version, ...)
   * plan the read again with them, which must keep the table's columns.
   */
  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap given) {
    if (given.isEmpty()) {
      return ((SupportsRead) inner).newScanBuilder(new CaseInsensitiveStringMap(options));
    }
    CaseInsensitiveStringMap all = new CaseInsensitiveStringMap(merged(given));
    OmnigraphProvider provider = new OmnigraphProvider();
    StructType read = provider.inferSchema(all);
    if (!read.equals(readSchema)) {
      throw new PythonBridge.OmnigraphException(ErrorCodes.OPTION_INVALID, "OptionError: [" + ErrorCodes.OPTION_INVALID + "] the read options "
          + given.asCaseSensitiveMap().keySet() + " change the columns of " + name() + " (" + read.simpleString()
          + " instead of " + readSchema.simpleString() + "); read with spark.read.format('omnigraph') instead");
    }
    Table table = provider.getTable(read, new Transform[0], all.asCaseSensitiveMap());
    return ((SupportsRead) table).newScanBuilder(all);
  }

  /** The provider's write, with the table's options (path, type, branch) and the statement's. */
  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    if (pinned) {
      throw OmnigraphCatalog.unsupported("a write to " + name() + " read AS OF a version or timestamp");
    }
    CaseInsensitiveStringMap all = new CaseInsensitiveStringMap(merged(info.options()));
    LogicalWriteInfo withOptions = OmnigraphProvider.withOptions(info, all);
    return ((SupportsWrite) inner).newWriteBuilder(withOptions);
  }

  /** The provider's schema of this table (no comments, no defaults). */
  StructType readSchema() {
    return readSchema;
  }

  /** The options a write of this table plans with: the table's, the statement's over them. */
  Map<String, String> writeOptions(CaseInsensitiveStringMap given) {
    return merged(given);
  }

  // -- UPDATE, MERGE INTO ------------------------------------------------------------------------

  /** A row-level statement on the branch head, its scan pinned to the head's version now. */
  @Override
  public RowLevelOperationBuilder newRowLevelOperationBuilder(RowLevelOperationInfo info) {
    if (pinned) {
      throw OmnigraphCatalog.unsupported(info.command() + " of " + name() + " read AS OF a version or timestamp");
    }
    JsonNode pin = OmnigraphCatalog.ask(catalog.tableRequest("row_level_pin", ident));
    return () -> new CatalogRowLevel(this, info.command(), pin);
  }

  // -- DELETE FROM ... WHERE --------------------------------------------------------------------

  /** Every condition is accepted here; the planner refuses one it cannot evaluate exactly (SQL_UNSUPPORTED). */
  @Override
  public boolean canDeleteWhere(Filter[] filters) {
    return !pinned;
  }

  /** ONE graph commit of the connector's delete of the rows matching {@code filters} (the planner's). */
  @Override
  public void deleteWhere(Filter[] filters) {
    ObjectNode r = catalog.tableRequest("delete_where", ident);
    ArrayNode out = r.putArray("filters");
    for (Filter f : filters) {
      out.add(filterJson(f));
    }
    OmnigraphCatalog.ask(r);
  }

  /** A Spark filter in spec/filters.json's form, which the planner turns into its filter rules. */
  static ObjectNode filterJson(Filter f) {
    ObjectNode o = LanceSnapshotSource.JSON.createObjectNode();
    o.put("op", f.getClass().getSimpleName());
    if (f instanceof And) {
      o.set("left", filterJson(((And) f).left()));
      o.set("right", filterJson(((And) f).right()));
    } else if (f instanceof Or) {
      o.set("left", filterJson(((Or) f).left()));
      o.set("right", filterJson(((Or) f).right()));
    } else if (f instanceof Not) {
      o.set("child", filterJson(((Not) f).child()));
    } else if (f instanceof EqualTo) {
      column(o, ((EqualTo) f).attribute(), ((EqualTo) f).value());
    } else if (f instanceof EqualNullSafe) {
      column(o, ((EqualNullSafe) f).attribute(), ((EqualNullSafe) f).value());
    } else if (f instanceof GreaterThan) {
      column(o, ((GreaterThan) f).attribute(), ((GreaterThan) f).value());
    } else if (f instanceof GreaterThanOrEqual) {
      column(o, ((GreaterThanOrEqual) f).attribute(), ((GreaterThanOrEqual) f).value());
    } else if (f instanceof LessThan) {
      column(o, ((LessThan) f).attribute(), ((LessThan) f).value());
    } else if (f instanceof LessThanOrEqual) {
      column(o, ((LessThanOrEqual) f).attribute(), ((LessThanOrEqual) f).value());
    } else if (f instanceof StringStartsWith) {
      column(o, ((StringStartsWith) f).attribute(), ((StringStartsWith) f).value());
    } else if (f instanceof StringEndsWith) {
      column(o, ((StringEndsWith) f).attribute(), ((StringEndsWith) f).value());
    } else if (f instanceof StringContains) {
      column(o, ((StringContains) f).attribute(), ((StringContains) f).value());
    } else if (f instanceof In) {
      o.put("column", ((In) f).attribute());
      ArrayNode values = o.putArray("values");
      for (Object v : ((In) f).values()) {
        if (v == null) {
          values.addNull();
        } else {
          values.add(literal(v));
        }
      }
    } else if (f instanceof IsNull) {
      o.put("column", ((IsNull) f).attribute());
    } else if (f instanceof IsNotNull) {
      o.put("column", ((IsNotNull) f).attribute());
    } else if (!(f instanceof AlwaysTrue) && !(f instanceof AlwaysFalse)) {
      o.put("text", f.toString()); // no rule reads it: the planner names it in its refusal
    }
    return o;
  }

  private static void column(ObjectNode o, String attribute, Object value) {
    o.put("column", attribute);
    if (value == null) {
      o.putNull("value");
    } else {
      o.set("value", literal(value));
    }
  }

  private static ObjectNode literal(Object v) {
    ObjectNode o = LanceSnapshotSource.JSON.createObjectNode();
    if (v instanceof String) {
      o.put("string", (String) v);
    } else if (v instanceof Integer || v instanceof Short || v instanceof Byte) {
      o.put("int", ((Number) v).intValue());
    } else if (v instanceof Long) {
      o.put("long", (Long) v);
    } else if (v instanceof Boolean) {
      o.put("bool", (Boolean) v);
    } else if (v instanceof Double || v instanceof Float) {
      o.put("double", ((Number) v).doubleValue());
    } else if (v instanceof LocalDate) {
      o.put("date", v.toString());
    } else if (v instanceof java.sql.Date) {
      o.put("date", ((java.sql.Date) v).toLocalDate().toString());
    } else {
      o.put("other", String.valueOf(v)); // no rule renders it exactly: the planner refuses it
    }
    return o;
  }
}
