"""The bundled sample graph (schema, JSONL) and the embedded session's log4j2 configuration."""
