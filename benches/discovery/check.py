#!/usr/bin/env python3
"""Validate the discovery benchmark data.

Checks that:
  * every catalog/<server>.json has the expected shape, its "server" field
    matches the file name and is a valid mcpd server name, its "package" is
    pinned (registry:name@version), and tool names are unique per server;
  * every "expect" and "also" in queries.json names a tool in the catalog
    (qualified as <server>__<tool>), and no query is duplicated;
  * synthetic.json is well formed (every verb has a verb_text).

Prints tool and query counts per server and how many queries share no word
with their expected tool's name.  Exits non-zero on any error.
Python 3.11, standard library only.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAME_RE = re.compile(r"^[a-z0-9_-]+$")
PKG_RE = re.compile(r"^(npm|pypi):.+@[0-9][^@]*$")
SEP = "__"


STOP = {"a", "an", "the", "to", "as", "of", "in", "on", "for", "from", "by", "with", "and", "or", "is", "it", "at"}


def words(s: str) -> set[str]:
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", s)
    return {w for w in re.split(r"[^a-z0-9]+", s.lower()) if w and w not in STOP}


def main() -> int:
    errors: list[str] = []
    catalog: dict[str, dict[str, dict]] = {}
    packages: dict[str, str] = {}

    for path in sorted((HERE / "catalog").glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        server = doc.get("server")
        if server != path.stem:
            errors.append(f"{path.name}: server field {server!r} does not match file name")
        if not isinstance(server, str) or not NAME_RE.match(server) or SEP in server:
            errors.append(f"{path.name}: bad server name {server!r}")
            continue
        pkg = doc.get("package", "")
        if not PKG_RE.match(pkg):
            errors.append(f"{path.name}: package {pkg!r} is not registry:name@version")
        packages[server] = pkg
        tools = doc.get("tools")
        if not isinstance(tools, list) or not tools:
            errors.append(f"{path.name}: no tools")
            continue
        names: dict[str, dict] = {}
        for t in tools:
            name = t.get("name") if isinstance(t, dict) else None
            if not isinstance(name, str) or not name:
                errors.append(f"{path.name}: tool without a name")
                continue
            if name in names:
                errors.append(f"{path.name}: duplicate tool {name!r}")
            if not isinstance(t.get("inputSchema"), dict):
                errors.append(f"{path.name}: {name} has no inputSchema object")
            names[name] = t
        catalog[server] = names

    def resolve(q: str) -> bool:
        server, sep, tool = q.partition(SEP)
        return bool(sep) and tool in catalog.get(server, {})

    queries = json.loads((HERE / "queries.json").read_text(encoding="utf-8"))
    seen: Counter[str] = Counter()
    per_server: Counter[str] = Counter()
    with_also = 0
    disjoint = 0
    for i, q in enumerate(queries):
        text, expect = q.get("query"), q.get("expect")
        if not isinstance(text, str) or not text.strip():
            errors.append(f"query #{i}: empty query")
            continue
        seen[text.strip().lower()] += 1
        extra = set(q) - {"query", "expect", "also"}
        if extra:
            errors.append(f"query #{i}: unknown keys {sorted(extra)}")
        if not isinstance(expect, str) or not resolve(expect):
            errors.append(f"query #{i} {text!r}: expect {expect!r} is not in the catalog")
            continue
        also = q.get("also", [])
        if not isinstance(also, list):
            errors.append(f"query #{i}: also must be a list")
            also = []
        for a in also:
            if not isinstance(a, str) or not resolve(a):
                errors.append(f"query #{i} {text!r}: also {a!r} is not in the catalog")
            if a == expect:
                errors.append(f"query #{i}: also repeats expect {a!r}")
        if also:
            with_also += 1
        server, _, tool = expect.partition(SEP)
        per_server[server] += 1
        if not (words(text) & words(tool)):
            disjoint += 1
    for text, n in seen.items():
        if n > 1:
            errors.append(f"query {text!r} appears {n} times")

    syn = json.loads((HERE / "synthetic.json").read_text(encoding="utf-8"))
    vt = syn.get("verb_text", {})
    for d in syn.get("domains", []):
        for v in d.get("verbs", []):
            if v not in vt:
                errors.append(f"synthetic.json: domain {d.get('domain')!r} verb {v!r} has no verb_text")

    total_tools = sum(len(v) for v in catalog.values())
    print(f"{'server':22} {'tools':>5} {'queries':>7}  package")
    for server in sorted(catalog, key=lambda s: (-len(catalog[s]), s)):
        print(f"{server:22} {len(catalog[server]):5} {per_server[server]:7}  {packages[server]}")
    print(f"{'total':22} {total_tools:5} {len(queries):7}")
    untested = [s for s in catalog if per_server[s] == 0]
    if untested:
        errors.append(f"servers with no query: {', '.join(sorted(untested))}")
    n = len(queries) or 1
    print(f"queries with acceptable alternates ('also'): {with_also}")
    print(f"queries sharing no word (bar stop words) with the expected tool's name: {disjoint} ({100 * disjoint / n:.0f}%)")
    print(f"synthetic domains: {len(syn.get('domains', []))}")
    if errors:
        print(f"\n{len(errors)} error(s):", file=sys.stderr)
        for e in errors:
            print(f"  {e}", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
