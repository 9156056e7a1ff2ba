"""The JVM shim jar, packaged by ``make wheel`` (see omnigraph_spark/spark/shim_conf.py)."""
