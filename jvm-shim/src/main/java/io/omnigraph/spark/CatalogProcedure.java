package io.omnigraph.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.procedures.BoundProcedure;
import org.apache.spark.sql.connector.catalog.procedures.ProcedureParameter;
import org.apache.spark.sql.connector.catalog.procedures.UnboundProcedure;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * {@code CALL og.system.<name>(graph => 'social', ...)}: a graph's maintenance and recovery
 * (optimize, cleanup, recover), Spark 4's stored procedures with no session extension. The
 * planner names the procedures and their parameters and runs them ({@code procedure},
 * {@code call}); the result is one row per table or sidecar touched (item, action, detail).
 * Runs on the driver.
 */
final class CatalogProcedure implements UnboundProcedure, BoundProcedure {
  private static final StructType RESULT = new StructType()
      .add("item", DataTypes.StringType)
      .add("action", DataTypes.StringType)
      .add("detail", DataTypes.StringType);

  private final OmnigraphCatalog catalog;
  private final String name;
  private final String description;
  private final ProcedureParameter[] parameters;
  private final String[] types;

  private CatalogProcedure(OmnigraphCatalog catalog, String name, String description, JsonNode params) {
    this.catalog = catalog;
    this.name = name;
    this.description = description;
    this.parameters = new ProcedureParameter[params.size()];
    this.types = new String[params.size()];
    for (int i = 0; i < params.size(); i++) {
      JsonNode p = params.get(i);
      types[i] = p.get("type").asText();
      ProcedureParameter.Builder b = ProcedureParameter.in(p.get("name").asText(), DataType.fromDDL(types[i]));
      if (!p.get("required").asBoolean()) {
        b = b.defaultValue("NULL");
      }
      parameters[i] = b.build();
    }
  }

  /** The procedure {@code ident} names (namespace {@code system}); the planner's typed error otherwise. */
  static CatalogProcedure load(OmnigraphCatalog catalog, Identifier ident) {
    ObjectNode r = catalog.tableRequest("procedure", ident);
    JsonNode answer = OmnigraphCatalog.ask(r);
    return new CatalogProcedure(catalog, ident.name(), answer.get("description").asText(), answer.get("parameters"));
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public String description() {
    return description;
  }

  @Override
  public BoundProcedure bind(StructType inputType) {
    return this;
  }

  @Override
  public ProcedureParameter[] parameters() {
    return parameters;
  }

  @Override
  public boolean isDeterministic() {
    return false;
  }

  @Override
  public Iterator<Scan> call(InternalRow args) {
    ObjectNode r = catalog.request("call", new String[0]);
    r.put("procedure", name);
    ObjectNode values = r.putObject("args");
    for (int i = 0; i < parameters.length; i++) {
      String key = parameters[i].name();
      if (args.isNullAt(i)) {
        values.putNull(key);
        continue;
      }
      switch (types[i]) {
        case "string": values.put(key, args.getUTF8String(i).toString()); break;
        case "boolean": values.put(key, args.getBoolean(i)); break;
        case "int": values.put(key, args.getInt(i)); break;
        case "bigint": values.put(key, args.getLong(i)); break;
        default: throw new IllegalStateException("procedure parameter type " + types[i]);
      }
    }
    JsonNode rows = OmnigraphCatalog.ask(r).get("rows");
    InternalRow[] out = new InternalRow[rows.size()];
    for (int i = 0; i < rows.size(); i++) {
      JsonNode row = rows.get(i);
      Object[] cells = new Object[RESULT.size()];
      for (int c = 0; c < cells.length; c++) {
        cells[c] = UTF8String.fromString(row.get(c).asText());
      }
      out[i] = new GenericInternalRow(cells);
    }
    Scan scan = new LocalScan() {
      @Override
      public InternalRow[] rows() {
        return out;
      }

      @Override
      public StructType readSchema() {
        return RESULT;
      }
    };
    return List.of(scan).iterator();
  }
}
