#!/usr/bin/env python3
"""Builds fuzz/corpus/<target>/ seed inputs from the strings in mcpd's tests.

JSON-RPC lines, TOML configs, SSE streams and URI templates are taken from the raw
string literals of src/ (unit tests) and tests/ (integration tests and the fixture),
and a few are written here to reach the corners the tests name. Run by seed.sh; the
output is deterministic, so the committed corpus can be rebuilt and compared.
"""

import hashlib
import pathlib
import re
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
# Seeds larger than this are skipped: the corpus stays small and quick to run.
MAX_SEED = 4096
# At most this many seeds per target.
MAX_PER_TARGET = 200

RAW = re.compile(r'r(#+)"(.*?)"\1', re.S)
PLAIN = re.compile(r'(?<![\w#])b?"((?:[^"\\\n]|\\.)*)"')


def unescape(s):
    """Rust string escapes to bytes: enough for the literals in mcpd's tests."""
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 == len(s):
            out += c.encode()
            i += 1
            continue
        n = s[i + 1]
        simple = {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\", '"': b'"', "'": b"'", "0": b"\0"}
        if n in simple:
            out += simple[n]
            i += 2
        elif n == "x":
            out.append(int(s[i + 2 : i + 4], 16))
            i += 4
        elif n == "u":
            end = s.index("}", i)
            out += chr(int(s[i + 3 : end], 16)).encode()
            i = end + 1
        elif n == "\n":
            # A line continuation: the newline and the next line's indentation go.
            i += 2
            while i < len(s) and s[i] in " \t":
                i += 1
        else:
            out += c.encode()
            i += 1
    return bytes(out)


def literals():
    """Every string literal in the Rust sources of src/ and tests/, as bytes."""
    for path in sorted([*ROOT.glob("src/**/*.rs"), *ROOT.glob("tests/**/*.rs")]):
        text = path.read_text(encoding="utf-8")
        for m in RAW.finditer(text):
            yield m.group(2).encode()
        for m in PLAIN.finditer(RAW.sub("", text)):
            try:
                yield unescape(m.group(1))
            except (ValueError, IndexError):
                continue


def json_lines(lits):
    return [l for l in lits if l.startswith(b"{") and b"jsonrpc" in l and b"\n" not in l]


def toml_configs(lits):
    found = [l for l in lits if re.search(rb"^\s*\[(servers|daemon|profiles)", l, re.M)]
    example = ROOT / "config" / "mcpd.toml"
    if example.exists():
        found.append(example.read_bytes())
    return found


def sse_streams(lits, lines):
    found = [l for l in lits if re.search(rb"(^|\n)(data|event|id|retry):", l)]
    for line in lines[:40]:
        found.append(b"event: message\nid: 1\ndata: " + line + b"\n\n")
        found.append(b"data: " + line.replace(b",", b",\r\ndata: ", 1) + b"\r\n\r\n")
    found.append(b"\xef\xbb\xbf: keepalive\n\nretry: 1500\nid: 42\ndata:\n\n")
    # The first byte picks the limit (1 to 128), the second how the input is split.
    return [bytes([127, 7]) + s for s in found]


def templates(lits):
    found = []
    for l in lits:
        if b"{" in l and re.match(rb"^[a-z]+://", l) and b"\n" not in l:
            uri = re.sub(rb"\{\+?[^}]*\}", b"x/y", l)
            found += [l + b"\n" + uri, l + b"\n" + re.sub(rb"\{[^}]*\}", b"7", l)]
    found += [
        b"b://items/{id}\nb://items/7",
        b"file://{+path}\nfile:///etc/hosts",
        b"x://{a}/{b}\nx://1/2",
        b"x://{#frag}{?q,r}{&s}{;t}{.u}{/v}\nx://",
        b"x://{unterminated\nx://a",
    ]
    return found


def heads(lits):
    """Request heads of the egress tests; the first byte picks pieces of 8 bytes."""
    found = [l for l in lits if re.match(rb"^[A-Z]+ [^ \r\n]+ HTTP/", l)]
    found += [
        b"CONNECT [::1]:8080 HTTP/1.1\r\nHost: [::1]:8080\r\n\r\nearly",
        b"GET http://A.example.:81/p?q#f HTTP/1.0\nHost: b\nProxy-Connection: x\n\n",
        b"POST http://a.example?x HTTP/1.1\r\nContent-Length: 4\r\n\r\nbody",
    ]
    return [bytes([7]) + h for h in found]


def framed(lines):
    # The first byte picks the limit (1 to 64), the second how the input is split.
    joined = b"\n".join(lines[:8])
    return [
        bytes([63, 3]) + b"short\r\n" + b"x" * 80 + b"\nnext\n\xff\xfe\nok",
        bytes([9, 0]) + b"a\nb\r\n\r\n\n" + "é".encode() * 8 + b"\n",
        bytes([63, 5]) + joined,
    ]


def write(target, seeds):
    out = CORPUS / target
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    kept = sorted({s for s in seeds if 0 < len(s) <= MAX_SEED})[:MAX_PER_TARGET]
    for seed in kept:
        (out / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
    print(f"{target}: {len(kept)} seeds", file=sys.stderr)


def main():
    lits = list(dict.fromkeys(literals()))
    lines = json_lines(lits)
    write("jsonrpc_parse", lines)
    write("http_wire", lines)
    write("framing", framed(lines))
    write("sse", sse_streams(lits, lines))
    write("uri_template", templates(lits))
    write("config", toml_configs(lits))
    write("egress_head", heads(lits))


if __name__ == "__main__":
    main()
