"""The ``omnigraph`` Spark data source (Python DataSource API, Spark 4).

``format("omnigraph")`` resolves through :func:`omnigraph_spark.spark.register` or, with the
package installed, through the top-level ``pyspark_omnigraph`` module's ``DefaultSource``.
Reads delegate to :mod:`.reader` (imported lazily: it is another module's job and pulls in
more than a write needs), a load-wide check's view to :mod:`.scans`; writes go to
:class:`.writer.OmnigraphWriter`, streams to :class:`.stream.OmnigraphStreamWriter`; the change
feed and stream reads go to :mod:`.changefeed`.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from ..errors import SqlUnsupportedError
from .error_tags import tag_error

#: why a read or write of a session catalog table reaches the Python source with no options
NO_TABLE_OPTIONS = (
    "the omnigraph Python data source got no options: Spark hands a Python data source none of a "
    "session catalog table's options (its PythonDataSourceV2.getTable keeps only the schema), so a "
    "table created USING omnigraph cannot be read or written without the shim jar. Use CREATE "
    "TEMPORARY VIEW <name> USING omnigraph OPTIONS (path '<graph>', type '<type>') (SELECT, INSERT "
    "INTO, INSERT OVERWRITE), or the catalog io.omnigraph.spark.OmnigraphCatalog with the jar (docs/sql.md)"
)


def _options_given(options) -> None:
    """Refuse the empty option map Spark gives for a session catalog table (:data:`NO_TABLE_OPTIONS`)."""
    if not options:
        raise tag_error(SqlUnsupportedError(NO_TABLE_OPTIONS))


class OmnigraphDataSource(DataSource):
    """Reads and writes one node or edge type of an Omnigraph 0.7 graph. Instantiated by Spark
    on the driver with the (case-insensitive) option map."""

    @classmethod
    def name(cls) -> str:
        return "omnigraph"

    def schema(self) -> StructType:
        """Driver: the table's Spark schema (reads); with ``readChangeFeed``, plus the change
        columns (:mod:`.changefeed`)."""
        from .changefeed import is_feed, schema_of  # lazy: Spark's source lookup must not import pyarrow or lance
        from .reader import read_schema  # lazy: as above

        return schema_of(self.options) if is_feed(self.options) else read_schema(self.options)

    def reader(self, schema: StructType) -> DataSourceReader:
        """Driver: a reader for the resolved schema (a snapshot, or the change feed); a load-wide
        check's view (the reserved option ``__omnigraph_scan``, with its schema given) is read by
        :mod:`.scans`."""
        _options_given(self.options)
        if "__omnigraph_scan" in self.options:
            from .scans import ScanReader  # lazy: Spark's source lookup must not import pyarrow or lance

            return ScanReader(self.options, schema)
        from .changefeed import is_feed, make_feed_reader  # lazy: Spark's source lookup must not import lance
        from .reader import make_reader  # lazy: as above

        return make_feed_reader(self.options, schema) if is_feed(self.options) else make_reader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Driver: ``readStream.format("omnigraph")``: the type's changes as a stream, offsets
        being graph versions (:mod:`.changefeed`)."""
        from .changefeed import ChangeFeedStreamReader  # lazy: Spark's source lookup must not import lance

        return ChangeFeedStreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """Driver: plan a write job (one graph commit). ``overwrite`` is Spark's save mode."""
        from .writer import OmnigraphWriter  # lazy: Spark's source lookup must not import pyarrow or lance

        _options_given(self.options)
        return OmnigraphWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """Driver: ``writeStream.format("omnigraph")``, one graph commit per micro-batch, exactly
        once (:mod:`.stream`). Spark calls it for every micro-batch and for its commit."""
        from .stream import OmnigraphStreamWriter  # lazy: Spark's source lookup must not import pyarrow or lance

        return OmnigraphStreamWriter(self.options, schema, overwrite)


__all__ = ["OmnigraphDataSource"]
