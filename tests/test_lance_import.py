"""``import omnigraph_spark`` defers the ``__init__`` of lance's REST namespace client
(omnigraph_spark/_lance_import.py): lance imports without its API classes, and the package
still gives every name it has, loaded on first use. Each case runs in a fresh interpreter,
since the test session imported lance long before."""

from __future__ import annotations

import json
import subprocess
import sys

from omnigraph_spark._lance_import import REST_CLIENT


def run(code: str) -> dict:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_lance_imports_without_the_rest_client_apis():
    got = run(f"""
import json, sys
import omnigraph_spark, lance, lance.namespace
from lance.fragment import FragmentMetadata
print(json.dumps({{"apis": sorted(m for m in sys.modules if m.startswith("{REST_CLIENT}.api"))}}))
""")
    assert got == {"apis": []}


def test_the_deferred_package_gives_every_name_on_first_use():
    got = run(f"""
import json, sys, threading
import omnigraph_spark, lance
import {REST_CLIENT} as client
names = []
def use():
    names.append(client.TableApi.__name__)
threads = [threading.Thread(target=use) for _ in range(4)]
[t.start() for t in threads]; [t.join() for t in threads]
from {REST_CLIENT} import Configuration, ApiClient
print(json.dumps({{"names": names, "loaded": "{REST_CLIENT}.api.table_api" in sys.modules,
                  "deferred_hook_left": "__getattr__" in vars(client),
                  "configuration": Configuration.__module__}}))
""")
    assert got["names"] == ["TableApi"] * 4
    assert got["loaded"] and not got["deferred_hook_left"]
    assert got["configuration"] == f"{REST_CLIENT}.configuration"


def test_nothing_changes_when_lance_came_first():
    got = run(f"""
import json, sys
import lance
had = "{REST_CLIENT}.api" in sys.modules
from omnigraph_spark._lance_import import defer_rest_client
print(json.dumps({{"had_apis": had, "deferred": defer_rest_client()}}))
""")
    assert got == {"had_apis": True, "deferred": False}
