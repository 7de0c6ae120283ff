#!/usr/bin/env python3
"""Generate src/LibTensorAsync.jl, the low-level Julia layer, from the C header.

One `@ccall` wrapper per function of include/tensorasync.h, one isbits struct
per C struct (same field order and C types, so Julia gives them the C layout),
an empty mutable struct per opaque handle type, aliases for the integer
typedefs and callback types, and the header's constants.

    python3 gen/generate.py            # rewrite src/LibTensorAsync.jl
    python3 gen/generate.py --check    # exit 1 if it is stale

Standard library only: the header is cbindgen's regular output, parsed by the
small declaration parser below (the ABI checker, check_abi.py, parses it again
independently with pycparser).
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
ROOT = os.path.abspath(os.path.join(PKG, "..", "..", ".."))
HEADER = os.path.join(ROOT, "include", "tensorasync.h")
OUT = os.path.join(PKG, "src", "LibTensorAsync.jl")

# C scalar types -> Julia.
BASE = {
    "void": "Cvoid", "char": "Cchar", "int": "Cint", "unsigned": "Cuint", "double": "Cdouble",
    "float": "Cfloat", "size_t": "Csize_t", "ptrdiff_t": "Cptrdiff_t", "uintptr_t": "Csize_t",
    "int8_t": "Int8", "int16_t": "Int16", "int32_t": "Int32", "int64_t": "Int64",
    "uint8_t": "UInt8", "uint16_t": "UInt16", "uint32_t": "UInt32", "uint64_t": "UInt64",
}
# Macro prefixes whose values have a typedef (typed Julia constants).
GROUPS = [("TA_STATUS_", "ta_status"), ("TA_DTYPE_", "ta_dtype"), ("TA_MODE_", "ta_mode"),
          ("TA_ORDER_", "ta_order"), ("TA_UPLO_", "ta_uplo"), ("TA_SIDE_", "ta_side"),
          ("TA_DIAG_", "ta_diag"), ("TA_SHUTDOWN_", "ta_shutdown"), ("TA_BACKEND_", "ta_backend")]
JULIA_KEYWORDS = {"baremodule", "begin", "break", "catch", "const", "continue", "do", "else",
                  "elseif", "end", "export", "false", "finally", "for", "function", "global", "if",
                  "import", "let", "local", "macro", "module", "quote", "return", "struct", "true",
                  "try", "using", "while", "abstract", "primitive", "mutable", "type"}


def doc_text(comment):
    lines = []
    for l in comment.strip()[3:-2].splitlines():
        l = l.strip()
        if l.startswith("*"):
            l = l[1:].strip()
        if l:
            lines.append(l)
    return " ".join(lines)


def parse(text):
    """Items in header order: (kind, name, data, doc)."""
    # Comments may hold braces and semicolons: swap each for a placeholder.
    comments = []

    def hide(m):
        comments.append(m.group(0))
        return " @@%d@@ " % (len(comments) - 1)

    text = re.sub(r"/\*.*?\*/|//[^\n]*", hide, text, flags=re.S)
    items = []
    doc = ""
    token = re.compile(r"@@\d+@@|#[^\n]*|\s+|[^;{}#@\s][^;{}]*(?:\{[^{}]*\}[^;{}]*)?;|[{}]|[^\s]")
    for m in token.finditer(text):
        t = m.group(0)
        if t.startswith("@@"):
            c = comments[int(t.strip("@"))]
            if c.startswith("/**"):
                doc = doc_text(c)
            continue
        if not t.strip():
            continue
        if t.startswith("#"):
            d = re.match(r"#define\s+(TA_[A-Z0-9_]+)\s+(.+?)\s*$", t)
            if d:
                items.append(("define", d.group(1), d.group(2), doc))
            doc = ""
            continue
        if not t.endswith(";"):
            continue
        decl = " ".join(re.sub(r"@@\d+@@", " ", t[:-1]).split())
        if decl.startswith('extern "C"'):
            decl = decl[len('extern "C" {'):].strip()
        items.append(classify(decl, doc))
        doc = ""
    return [i for i in items if i]


def split_type(s):
    """'const struct ta_tensor *tensor' -> ('ta_tensor', 1, 'tensor')."""
    s = s.replace("*", " * ")
    toks = [t for t in s.split() if t not in ("const", "struct")]
    name = toks[-1] if toks[-1] != "*" else None
    if name:
        toks = toks[:-1]
    stars = toks.count("*")
    base = " ".join(t for t in toks if t != "*")
    return base, stars, name


def classify(decl, doc):
    m = re.match(r"typedef struct (\w+) (\w+)$", decl)
    if m:
        return ("opaque", m.group(2), None, doc)
    m = re.match(r"typedef struct (\w+) \{(.*)\} (\w+)$", decl)
    if m:
        fields = []
        for f in m.group(2).split(";"):
            f = " ".join(re.sub(r"/\*.*?\*/", " ", f, flags=re.S).split())
            if not f:
                continue
            fp = re.match(r"(.+?)\(\s*\*\s*(\w+)\s*\)\s*\(.*\)$", f)
            if fp:
                fields.append((fp.group(2), ("fnptr", 0)))
            else:
                base, stars, name = split_type(f)
                fields.append((name, (base, stars)))
        return ("struct", m.group(3), fields, doc)
    m = re.match(r"typedef (.+?)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)$", decl)
    if m:
        return ("fnptr", m.group(2), None, doc)
    m = re.match(r"typedef ([\w ]+?) (\w+)$", decl)
    if m:
        return ("alias", m.group(2), m.group(1).strip(), doc)
    m = re.match(r"(.+?)\b(\w+)\s*\((.*)\)$", decl)
    if m:
        rbase, rstars, _ = split_type(m.group(1) + " _r")
        params = []
        args = m.group(3).strip()
        if args and args != "void":
            for a in args.split(","):
                base, stars, name = split_type(a)
                params.append((name, (base, stars)))
        return ("function", m.group(2), ((rbase, rstars), params), doc)
    raise SystemExit("generate.py: cannot parse declaration: " + decl)


def jtype(t, fnptrs):
    base, stars = t
    if base == "fnptr" or base in fnptrs:
        j = base if base in fnptrs else "Ptr{Cvoid}"
    else:
        j = BASE.get(base, base)
    for _ in range(stars):
        j = "Ptr{%s}" % j
    return j


def jname(n):
    return n + "_" if n in JULIA_KEYWORDS else n


def comment(doc, indent=""):
    if not doc:
        return ""
    out, line = [], indent + "#"
    for w in doc.split():
        if len(line) + 1 + len(w) > 96 and line.strip() != "#":
            out.append(line)
            line = indent + "#"
        line += " " + w
    out.append(line)
    return "\n".join(out) + "\n"


def render(items):
    fnptrs = {n for k, n, _, _ in items if k == "fnptr"}
    o = ["# Generated by gen/generate.py from include/tensorasync.h; do not edit.",
         "# Regenerate with `python3 bindings/julia/TensorAsync.jl/gen/generate.py`.", "",
         "module LibTensorAsync", "",
         "# The shared library: TENSORASYNC_LIB (a path) when set at load time, else the",
         "# dynamic loader's search for libtensorasync.",
         'const libtensorasync = get(ENV, "TENSORASYNC_LIB", "libtensorasync")', ""]
    aliases = {n: d for k, n, d, _ in items if k == "alias"}
    for kind, name, data, doc in items:
        if kind == "opaque":
            o.append(comment(doc) + "mutable struct %s end\n" % name)
        elif kind == "alias":
            o.append(comment(doc) + "const %s = %s\n" % (name, BASE.get(data, data)))
        elif kind == "fnptr":
            o.append(comment(doc) + "const %s = Ptr{Cvoid}\n" % name)
        elif kind == "struct":
            body = "".join("    %s::%s\n" % (jname(f), jtype(t, fnptrs)) for f, t in data)
            o.append(comment(doc) + "struct %s\n%send\n" % (name, body))
    for kind, name, data, doc in items:
        if kind != "define":
            continue
        typ = next((t for p, t in GROUPS if name.startswith(p) and t in aliases), None)
        val = data.strip()
        if re.fullmatch(r"\(?-?\d+\)?", val):
            val = val.strip("()")
            o.append(comment(doc) + ("const %s = %s(%s)" % (name, typ, val) if typ
                                     else "const %s = %s" % (name, val)))
        else:
            o.append(comment(doc) + "const %s = %s" % (name, val))
    o.append("")
    for kind, name, data, doc in items:
        if kind != "function":
            continue
        ret, params = data
        names = [jname(p) for p, _ in params]
        args = ", ".join("%s::%s" % (jname(p), jtype(t, fnptrs)) for p, t in params)
        o.append(comment(doc) + "function %s(%s)\n    @ccall libtensorasync.%s(%s)::%s\nend\n"
                 % (name, ", ".join(names), name, args, jtype(ret, fnptrs)))
    o.append("end # module LibTensorAsync\n")
    return "\n".join(o)


def generate(header=HEADER):
    with open(header) as f:
        return render(parse(f.read()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="exit 1 if the output is stale")
    ap.add_argument("--header", default=HEADER)
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args()
    text = generate(a.header)
    if a.check:
        old = open(a.out).read() if os.path.exists(a.out) else ""
        if old != text:
            print("%s is stale: run %s" % (a.out, os.path.relpath(__file__)), file=sys.stderr)
            return 1
        return 0
    with open(a.out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
