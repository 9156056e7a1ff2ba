package io.omnigraph.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.NamespaceChange;
import org.apache.spark.sql.connector.catalog.ProcedureCatalog;
import org.apache.spark.sql.connector.catalog.SupportsNamespaces;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.connector.catalog.procedures.UnboundProcedure;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.connector.catalog.TableWritePrivilege;

/**
 * The SQL catalog: {@code spark.sql.catalog.og = io.omnigraph.spark.OmnigraphCatalog} with
 * {@code spark.sql.catalog.og.root} a directory or bucket prefix holding graphs (and
 * {@code spark.sql.catalog.og.storage.<key>} the storage options). A graph is a namespace
 * ({@code og.social}: the graph at {@code <root>/social}); its node and edge types are tables
 * ({@code og.social.Person}); {@code og.social.Person.branch_dev} is branch {@code dev}.
 *
 * <p>A shell, like {@link OmnigraphProvider}: every question (list graphs or types, describe a
 * type, create or drop a graph, a delete, a procedure) is one request to the Python planner
 * ({@link PythonBridge}, answered by {@code omnigraph_spark.spark.catalog}), with the connector's
 * typed errors; a table's reads and writes are the provider's ({@link CatalogTable}). Runs on
 * the driver. docs/sql.md.
 */
public final class OmnigraphCatalog implements TableCatalog, SupportsNamespaces, ProcedureCatalog {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(OmnigraphCatalog.class);

  private String name;
  private Map<String, String> options = Map.of(); // the catalog's own options, as Spark gave them

  @Override
  public void initialize(String name, CaseInsensitiveStringMap options) {
    this.name = name;
    this.options = new HashMap<>(options.asCaseSensitiveMap());
  }

  @Override
  public String name() {
    return name;
  }

  ObjectNode request(String op, String[] namespace) {
    ObjectNode r = LanceSnapshotSource.JSON.createObjectNode();
    r.put("op", op);
    r.set("catalog", LanceSnapshotSource.JSON.valueToTree(options));
    ArrayNode ns = r.putArray("namespace");
    for (String part : namespace) {
      ns.add(part);
    }
    return r;
  }

  static JsonNode ask(ObjectNode request) {
    return PythonBridge.ask(request, null);
  }

  /** The typed error for a statement the catalog does not run (Python's SqlUnsupportedError). */
  static PythonBridge.OmnigraphException unsupported(String message) {
    return new PythonBridge.OmnigraphException(ErrorCodes.SQL_UNSUPPORTED, "SqlUnsupportedError: [" + ErrorCodes.SQL_UNSUPPORTED + "] " + message);
  }

  // -- namespaces: graphs ---------------------------------------------------------------------

  @Override
  public String[][] listNamespaces() {
    JsonNode graphs = ask(request("list_graphs", new String[0])).get("graphs");
    String[][] out = new String[graphs.size()][];
    for (int i = 0; i < graphs.size(); i++) {
      out[i] = new String[] {graphs.get(i).asText()};
    }
    return out;
  }

  @Override
  public String[][] listNamespaces(String[] namespace) {
    if (namespace.length == 0) {
      return listNamespaces();
    }
    ask(request("list_types", namespace)); // a graph has no child namespaces; a missing one is an error
    return new String[0][];
  }

  @Override
  public boolean namespaceExists(String[] namespace) {
    return ask(request("graph_exists", namespace)).get("exists").asBoolean();
  }

  @Override
  public Map<String, String> loadNamespaceMetadata(String[] namespace) {
    JsonNode answer = ask(request("list_types", namespace));
    Map<String, String> out = new HashMap<>();
    out.put(SupportsNamespaces.PROP_LOCATION, answer.get("root").asText());
    List<String> types = new ArrayList<>();
    answer.get("types").forEach(t -> types.add(t.get("kind").asText() + " " + t.get("name").asText()));
    out.put("omnigraph.types", String.join(", ", types));
    return out;
  }

  @Override
  public void createNamespace(String[] namespace, Map<String, String> metadata) {
    ObjectNode r = request("create_graph", namespace);
    r.set("properties", LanceSnapshotSource.JSON.valueToTree(metadata));
    ask(r);
  }

  @Override
  public void alterNamespace(String[] namespace, NamespaceChange... changes) {
    throw unsupported("ALTER NAMESPACE " + String.join(".", namespace) + ": a graph's schema changes with the "
        + "Omnigraph engine's schema commands, not through the catalog");
  }

  @Override
  public boolean dropNamespace(String[] namespace, boolean cascade) {
    ObjectNode r = request("drop_graph", namespace);
    r.put("cascade", cascade);
    return ask(r).get("dropped").asBoolean();
  }

  // -- tables: node and edge types ------------------------------------------------------------

  @Override
  public Identifier[] listTables(String[] namespace) {
    JsonNode types = ask(request("list_types", namespace)).get("types");
    Identifier[] out = new Identifier[types.size()];
    for (int i = 0; i < types.size(); i++) {
      out[i] = Identifier.of(namespace, types.get(i).get("name").asText());
    }
    return out;
  }

  ObjectNode tableRequest(String op, Identifier ident) {
    ObjectNode r = request(op, ident.namespace());
    r.put("name", ident.name());
    return r;
  }

  private Table load(Identifier ident, String version, Long timestampMicros) {
    ObjectNode r = tableRequest("table", ident);
    if (version != null) {
      r.put("version", version);
    }
    if (timestampMicros != null) {
      r.put("timestamp_us", timestampMicros);
    }
    return CatalogTable.of(this, ident, ask(r), version != null || timestampMicros != null);
  }

  @Override
  public Table loadTable(Identifier ident) {
    return load(ident, null, null);
  }

  /**
   * A table a write statement names. A statement that updates or deletes rows (UPDATE, DELETE,
   * a MERGE with an UPDATE or only DELETE clauses) gets the table without {@code
   * ACCEPT_ANY_SCHEMA}, so Spark resolves it against the type's columns and plans it as a
   * row-level operation ({@link CatalogRowLevel}); an INSERT ({@code INSERT}, and {@code INSERT,
   * DELETE} for INSERT OVERWRITE) keeps matching columns by name. A MERGE whose clauses ask for
   * the same privileges as an INSERT (only INSERT, or DELETE and INSERT clauses) is therefore
   * Spark's analysis error (docs/sql.md).
   */
  @Override
  public Table loadTable(Identifier ident, Set<TableWritePrivilege> privileges) {
    Table t = load(ident, null, null);
    boolean insert = privileges.contains(TableWritePrivilege.INSERT);
    boolean rowLevel = privileges.contains(TableWritePrivilege.UPDATE)
        || (!insert && privileges.contains(TableWritePrivilege.DELETE));
    LOG.debug("omnigraph catalog: {} loaded for {} ({})", ident, privileges, rowLevel ? "row-level" : "by name");
    return rowLevel ? ((CatalogTable) t).forUpdates() : t;
  }

  @Override
  public Table loadTable(Identifier ident, String version) {
    return load(ident, version, null);
  }

  @Override
  public Table loadTable(Identifier ident, long timestamp) {
    return load(ident, null, timestamp);
  }

  /** Whether the identifier names a type: false for a missing graph, type or branch (the planner decides). */
  @Override
  public boolean tableExists(Identifier ident) {
    return ask(tableRequest("table_exists", ident)).path("exists").asBoolean(false);
  }

  @Override
  public Table createTable(Identifier ident, StructType schema, Transform[] partitions, Map<String, String> properties) {
    throw unsupported("CREATE TABLE " + ident + ": a graph's node and edge types come from its schema; create the "
        + "graph with CREATE NAMESPACE <catalog>.<graph> WITH PROPERTIES ('schema' = '<.pg text>')");
  }

  @Override
  public Table alterTable(Identifier ident, TableChange... changes) {
    throw unsupported("ALTER TABLE " + ident + ": a graph's schema changes with the Omnigraph engine's schema "
        + "commands, not through the catalog");
  }

  @Override
  public boolean dropTable(Identifier ident) {
    throw unsupported("DROP TABLE " + ident + ": a type is part of its graph's schema; DELETE FROM removes its "
        + "rows, DROP NAMESPACE ... CASCADE the whole graph");
  }

  @Override
  public void renameTable(Identifier oldIdent, Identifier newIdent) {
    throw unsupported("ALTER TABLE " + oldIdent + " RENAME: a type is named by its graph's schema");
  }

  // -- procedures: CALL og.system.<name>(...) ---------------------------------------------------

  @Override
  public UnboundProcedure loadProcedure(Identifier ident) {
    return CatalogProcedure.load(this, ident);
  }
}
