"""``import lance`` without loading its REST namespace client's API classes up front.

``import lance`` imports ``lance.namespace`` and so ``lance_namespace``, which needs only the
request and response models of ``lance_namespace_urllib3_client``. That package's ``__init__``
also imports every generated REST API class, each method wrapped by pydantic's ``validate_call``:
about two thirds of ``import lance`` (1.7-2.6 s of CPU on a 2-core VM). Spark starts a fresh
Python process for each step of a Python data source write (its planner, the tasks' workers,
its commit), and each of them imports lance, so a small write pays it several times over.

:func:`defer_rest_client` registers that package with its ``__init__`` not yet run: its
submodules (``.models`` above all) import as before, and the first lookup of a name on the
package itself (a REST namespace client, which this connector never uses) runs the ``__init__``
then and returns the name, as if it had run at import. Nothing changes when lance or the package
was imported already, or when the package is absent or not a regular package. Newer pylance
lines make this import lazy themselves (lance-format/lance#9273); the 7.0 line that Omnigraph 0.7
needs does not.
"""

from __future__ import annotations

import importlib.util
import sys
import threading

REST_CLIENT = "lance_namespace_urllib3_client"


def defer_rest_client() -> bool:
    """Register :data:`REST_CLIENT` with its ``__init__`` deferred; True when it did."""
    if REST_CLIENT in sys.modules or "lance" in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(REST_CLIENT)
    except (ImportError, ValueError):
        return False
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        return False
    package = importlib.util.module_from_spec(spec)
    lock = threading.RLock()
    loading = False

    def load_package(name: str):
        """PEP 562: asked only for a name the package lacks. Runs its ``__init__`` once; other
        threads asking meanwhile wait for it, and its own lookups while it runs find nothing."""
        nonlocal loading
        with lock:
            if loading:
                raise AttributeError(f"module {REST_CLIENT!r} has no attribute {name!r} (yet: its __init__ runs)")
            if package.__dict__.get("__getattr__") is load_package:
                loading = True
                try:
                    spec.loader.exec_module(package)  # type: ignore[union-attr]  # a source file's spec has a loader
                finally:
                    loading = False
                if package.__dict__.get("__getattr__") is load_package:
                    del package.__getattr__
        return getattr(package, name)

    package.__getattr__ = load_package  # type: ignore[method-assign]  # a module-level __getattr__ (PEP 562)
    sys.modules[REST_CLIENT] = package
    return True
