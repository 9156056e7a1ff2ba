"""Generate the sample graph data (social.jsonl) for social.pg, deterministically.

Run from anywhere: ``python omnigraph_spark/data/generate_sample.py``. The output is committed;
tests/examples/test_sample_data.py checks that it still matches this generator byte for byte.
Records use the engine's JSONL envelope: ``{"type": T, "data": {...}}`` for nodes and
``{"edge": E, "from": s, "to": d, "data": {...}}`` for edges.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path

SEED = 20240607
N_PEOPLE = 80
FIRST = [
    "Ada",
    "Ben",
    "Chloe",
    "Dev",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Kemi",
    "Luis",
    "Maya",
    "Nils",
    "Olga",
    "Priya",
    "Quinn",
    "Rosa",
    "Sami",
    "Tara",
]
LAST = ["Okafor", "Lindqvist", "Moreau", "Tanaka", "Silva", "Novak", "Haddad", "Kowalski", "Reyes", "Brennan"]
CITIES = ["Berlin", "Lisbon", "Toronto", "Nairobi", "Osaka", "Austin", "Warsaw", "Lyon"]
ROLES = ["engineer", "designer", "manager", "analyst", "founder", "researcher"]
SKILLS = ["python", "scala", "sql", "spark", "rust", "design", "ml", "finance", "sales", "ops", "graphs"]
COMPANIES = [
    ("Acme Analytics", "software"),
    ("Birch Bank", "finance"),
    ("Cobalt Health", "health"),
    ("Dune Energy", "energy"),
    ("Ember Media", "media"),
    ("Fjord Retail", "retail"),
    ("Granite Labs", "software"),
    ("Harbor Capital", "finance"),
    ("Iris Diagnostics", "health"),
    ("Juniper Grid", "energy"),
    ("Kite Studios", "media"),
    ("Lumen Stores", "retail"),
]
TITLES = {
    "engineer": "Software Engineer",
    "designer": "Product Designer",
    "manager": "Engineering Manager",
    "analyst": "Data Analyst",
    "founder": "Co-founder",
    "researcher": "Research Scientist",
}
EPOCH = dt.date(1970, 1, 1)


def _date(rng: random.Random, start: dt.date, end: dt.date) -> str:
    return (start + dt.timedelta(days=rng.randrange((end - start).days))).isoformat()


def records() -> Iterator[dict]:
    """Every record of the sample, nodes first (people, companies), then edges."""
    rng = random.Random(SEED)
    names: list[str] = []
    roles: list[str] = []
    for i in range(N_PEOPLE):
        name = f"{FIRST[i % len(FIRST)]} {LAST[(i * 7 + i // len(FIRST)) % len(LAST)]}"
        names.append(name)
        roles.append(ROLES[rng.randrange(len(ROLES))])
        age = rng.randrange(22, 64)
        data = {
            "name": name,
            "age": age,
            "born": _date(rng, dt.date(2024 - age, 1, 1), dt.date(2024 - age, 12, 31)),
            "city": CITIES[rng.randrange(len(CITIES))],
            "role": roles[-1],
            "skills": sorted(rng.sample(SKILLS, rng.randrange(1, 4))),
        }
        if i % 17 == 5:
            del data["age"]  # optional properties are really optional
        if i % 23 == 7:
            data["skills"] = None
        yield {"type": "Person", "data": data}
    assert len(set(names)) == len(names), "sample person names must be unique"
    for name, industry in COMPANIES:
        data = {
            "name": name,
            "industry": industry,
            "founded": _date(rng, dt.date(1985, 1, 1), dt.date(2021, 1, 1)),
            "employees": rng.randrange(20, 5000),
            "revenue_musd": round(rng.uniform(1.5, 900.0), 2),
        }
        yield {"type": "Company", "data": data}
    seen: set[tuple[str, str]] = set()
    while len(seen) < 3 * N_PEOPLE:
        a, b = rng.sample(names, 2)
        if (a, b) in seen:
            continue
        seen.add((a, b))
        yield {
            "edge": "Knows",
            "from": a,
            "to": b,
            "data": {"since": _date(rng, dt.date(2005, 1, 1), dt.date(2024, 6, 1)), "strength": rng.randrange(1, 6)},
        }
    rng2 = random.Random(SEED + 1)
    for i, name in enumerate(names):
        if i % 9 == 8:
            continue  # a few people have no employer in the sample
        company = COMPANIES[rng2.randrange(len(COMPANIES))][0]
        yield {
            "edge": "WorksAt",
            "from": name,
            "to": company,
            "data": {"title": TITLES[roles[i]], "start": _date(rng2, dt.date(2010, 1, 1), dt.date(2024, 6, 1))},
        }


def render() -> str:
    return "".join(json.dumps(r, separators=(", ", ": "), ensure_ascii=False) + "\n" for r in records())


def main(argv=None) -> int:
    out = Path(__file__).with_name("social.jsonl")
    text = render()
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out} ({text.count(chr(10))} records)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
