#!/usr/bin/env python3
"""Check TensorAsync.jl against the C header without Julia.

1. The package parses: every .jl file under src/ and test/ gives a tree
   without ERROR or MISSING nodes (tree-sitter-julia).
2. The generated layer is fresh (gen/generate.py --check).
3. Every @ccall in src/ agrees with the header: the function exists, and
   each argument type and the return type, with Julia's aliases resolved,
   are the C types (the header is parsed independently of the generator,
   with pycparser after gcc's preprocessor); every C function has exactly one
   @ccall wrapper with as many Julia parameters as C ones.
4. Struct layouts agree: a generated C program prints sizeof, alignof and
   offsetof of every struct and field; the checker computes the layout that
   the Julia struct definitions have (Julia lays isbits structs out by the C
   rules, from the fields' sizes and alignments) and compares.
5. Constants agree: every #define TA_* of the header has a Julia constant of
   the same value.
6. Every LibTensorAsync name that the hand-written code and the tests use
   (`L.ta_x`, `L.TA_X`) is defined by the generated layer.

Needs: python3 with tree-sitter, tree-sitter-julia and pycparser; gcc.
"""
import os
import re
import subprocess
import sys
import tempfile

import pycparser
from pycparser import c_ast
import tree_sitter_julia
from tree_sitter import Language, Parser

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
ROOT = os.path.abspath(os.path.join(PKG, "..", "..", ".."))
HEADER = os.path.join(ROOT, "include", "tensorasync.h")
# `check_abi.py [PACKAGE_DIR [HEADER]]` checks another copy (the self-test does).
if len(sys.argv) > 1:
    PKG = os.path.abspath(sys.argv[1])
if len(sys.argv) > 2:
    HEADER = os.path.abspath(sys.argv[2])
LIB_JL = os.path.join(PKG, "src", "LibTensorAsync.jl")

# C standard typedefs (LP64 Linux), as Julia's primitive types.
C_PRIM = {"uint8_t": "UInt8", "uint16_t": "UInt16", "uint32_t": "UInt32", "uint64_t": "UInt64",
          "int8_t": "Int8", "int16_t": "Int16", "int32_t": "Int32", "int64_t": "Int64",
          "size_t": "UInt64", "ptrdiff_t": "Int64", "uintptr_t": "UInt64", "int": "Int32",
          "unsigned int": "UInt32", "char": "Int8", "double": "Float64", "float": "Float32",
          "void": "Cvoid"}
FAKE_STD = """
typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;
typedef unsigned long uint64_t; typedef signed char int8_t; typedef short int16_t;
typedef int int32_t; typedef long int64_t; typedef unsigned long size_t; typedef long ptrdiff_t;
typedef unsigned long uintptr_t;
"""
STD_NAMES = set(C_PRIM) - {"int", "unsigned int", "char", "double", "float", "void"}
# Julia's C type aliases on x86_64 Linux.
J_PRIM = {"Csize_t": "UInt64", "Cptrdiff_t": "Int64", "Cint": "Int32", "Cuint": "UInt32",
          "Cchar": "Int8", "Cdouble": "Float64", "Cfloat": "Float32", "Clong": "Int64",
          "Culong": "UInt64", "Cvoid": "Cvoid"}
J_SIZE = {"UInt8": 1, "Int8": 1, "UInt16": 2, "Int16": 2, "UInt32": 4, "Int32": 4, "Float32": 4,
          "UInt64": 8, "Int64": 8, "Float64": 8}

failures = []


def fail(msg):
    failures.append(msg)


# ------------------------------------------------------------------ C side

def parse_c():
    with open(HEADER) as f:
        text = f.read()
    body = re.sub(r"^\s*#\s*include[^\n]*$", "", text, flags=re.M)
    pre = subprocess.run(["gcc", "-E", "-P", "-x", "c", "-"], input=FAKE_STD + body,
                         capture_output=True, text=True, check=True).stdout
    ast = pycparser.CParser().parse(pre, HEADER)
    typedefs, structs, functions = {}, {}, {}
    for ext in ast.ext:
        if isinstance(ext, c_ast.Typedef):
            if ext.name in STD_NAMES:
                continue
            typedefs[ext.name] = ext.type
            t = ext.type
            if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.Struct) and t.type.decls:
                structs[ext.name] = [(d.name, d.type) for d in t.type.decls]
        elif isinstance(ext, c_ast.Decl) and isinstance(ext.type, c_ast.FuncDecl):
            fd = ext.type
            params = []
            for p in (fd.args.params if fd.args else []):
                if isinstance(p.type, c_ast.TypeDecl) and isinstance(p.type.type, c_ast.IdentifierType) \
                        and p.type.type.names == ["void"] and p.name is None:
                    continue
                params.append((p.name, p.type))
            functions[ext.name] = (fd.type, params)
    return typedefs, structs, functions


def c_canon(t, typedefs):
    """A C type as a canonical Julia-like string: Ptr{...}, UInt32, ta_tensor."""
    if isinstance(t, c_ast.PtrDecl):
        if isinstance(t.type, c_ast.FuncDecl):
            return "Ptr{Cvoid}"
        return "Ptr{%s}" % c_canon(t.type, typedefs)
    if isinstance(t, c_ast.FuncDecl):
        return "Ptr{Cvoid}"
    if isinstance(t, c_ast.TypeDecl):
        inner = t.type
        if isinstance(inner, c_ast.Struct):
            return inner.name
        if isinstance(inner, c_ast.IdentifierType):
            name = " ".join(inner.names)
            if name in C_PRIM:
                return C_PRIM[name]
            if name in typedefs:
                td = typedefs[name]
                if isinstance(td, c_ast.TypeDecl) and isinstance(td.type, c_ast.Struct):
                    return td.type.name
                return c_canon(td, typedefs)
            raise SystemExit("unknown C type " + name)
    raise SystemExit("unsupported C type node %r" % t)


def c_layouts(structs):
    """sizeof/alignof/offsetof of every struct, from a compiled C program."""
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include <stdalign.h>',
             '#include "%s"' % os.path.basename(HEADER), 'int main(void) {']
    for s, fields in structs.items():
        lines.append('printf("%s %%zu %%zu\\n", sizeof(%s), alignof(%s));' % (s, s, s))
        for f, _ in fields:
            lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (s, f, s, f))
    lines.append("return 0; }")
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        subprocess.run(["gcc", "-std=c11", "-Wall", "-Werror", "-I", os.path.dirname(HEADER),
                        src, "-o", exe], check=True)
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    res = {}
    for line in out.splitlines():
        parts = line.split()
        res[parts[0]] = tuple(int(x) for x in parts[1:])
    return res


def c_defines():
    out = {}
    with open(HEADER) as f:
        for line in f:
            m = re.match(r"#define\s+(TA_[A-Z0-9_]+)\s+(.+?)\s*$", line)
            if m:
                v = m.group(2).strip()
                out[m.group(1)] = int(v.strip("()")) if re.fullmatch(r"\(?-?\d+\)?", v) else v.strip('"')
    return out


# ------------------------------------------------------------------ Julia side

PARSER = Parser(Language(tree_sitter_julia.language()))


def parse_jl(path):
    with open(path, "rb") as f:
        src = f.read()
    return PARSER.parse(src), src


def walk(n):
    yield n
    for c in n.children:
        yield from walk(c)


def txt(n):
    return n.text.decode()


def syntax_errors(tree):
    bad = [n for n in walk(tree.root_node) if n.type == "ERROR" or n.is_missing]
    return ["line %d: %s" % (n.start_point[0] + 1, "missing " + n.type if n.is_missing else txt(n)[:60])
            for n in bad]


def j_type(n):
    """A type expression node as a nested string, aliases unresolved."""
    if n.type == "identifier":
        return txt(n)
    if n.type == "parametrized_type_expression":
        head = txt(n.children[0])
        args = [c for c in n.children[1].children if c.type not in ("{", "}", ",")]
        return "%s{%s}" % (head, ",".join(j_type(a) for a in args))
    if n.type == "field_expression":
        return txt(n).split(".")[-1]
    raise SystemExit("unsupported Julia type expression %r" % txt(n))


def j_resolve(t, aliases, depth=0):
    if depth > 20:
        raise SystemExit("alias loop at " + t)
    m = re.fullmatch(r"(\w+)\{(.*)\}", t)
    if m:
        return "%s{%s}" % (m.group(1), j_resolve(m.group(2), aliases, depth + 1))
    if t in J_PRIM:
        return J_PRIM[t]
    if t in aliases:
        return j_resolve(aliases[t], aliases, depth + 1)
    return t


def julia_module(tree):
    """Definitions of the generated module: aliases, structs, opaque types, consts, ccalls."""
    aliases, structs, opaque, consts, ccalls, wrappers = {}, {}, set(), {}, {}, {}
    for n in walk(tree.root_node):
        if n.type == "struct_definition":
            name = txt([c for c in n.children if c.type == "type_head"][0])
            fields = [(txt(c.children[0]), j_type(c.children[2])) for c in n.children
                      if c.type == "typed_expression"]
            if any(c.type == "mutable" for c in n.children) and not fields:
                opaque.add(name)
            else:
                structs[name] = fields
        elif n.type == "const_statement":
            a = [c for c in n.children if c.type == "assignment"][0]
            lhs, rhs = txt(a.children[0]), a.children[2]
            if rhs.type in ("identifier", "parametrized_type_expression") and not lhs.startswith("TA_"):
                aliases[lhs] = j_type(rhs)
            else:
                consts[lhs] = rhs
        elif n.type == "function_definition":
            sig = [c for c in n.children if c.type == "signature"][0].children[0]
            fname = txt(sig.children[0])
            nparams = len([c for c in sig.children[1].children if c.type not in ("(", ")", ",")])
            wrappers[fname] = nparams
    return aliases, structs, opaque, consts, wrappers


def ccalls_in(tree, aliases):
    out = []
    for n in walk(tree.root_node):
        if n.type != "macrocall_expression" or txt(n.children[0]) != "@ccall":
            continue
        args = [c for c in n.children[1].children if c.is_named]
        te = args[0]
        if te.type != "typed_expression":
            fail("line %d: @ccall without a return type" % (n.start_point[0] + 1))
            continue
        call, ret = te.children[0], te.children[2]
        fname = txt(call.children[0]).split(".")[-1]
        params = [c for c in call.children[1].children if c.is_named]
        ptypes = []
        for p in params:
            if p.type != "typed_expression":
                fail("%s: argument %s has no type" % (fname, txt(p)))
                continue
            ptypes.append(j_resolve(j_type(p.children[2]), aliases))
        out.append((fname, ptypes, j_resolve(j_type(ret), aliases), n.start_point[0] + 1))
    return out


def j_value(n):
    if n.type == "integer_literal":
        return int(txt(n))
    if n.type == "string_literal":
        return txt(n)[1:-1]
    if n.type == "unary_expression":
        return -j_value(n.children[1]) if txt(n.children[0]) == "-" else j_value(n.children[1])
    if n.type == "call_expression":  # ta_status(22)
        return j_value([c for c in n.children[1].children if c.is_named][0])
    raise SystemExit("unsupported constant expression " + txt(n))


def j_layout(name, structs, aliases, cache):
    """(size, align, {field: offset}) of a Julia isbits struct."""
    if name in cache:
        return cache[name]
    off, align, offsets = 0, 1, {}
    for f, t in structs[name]:
        t = j_resolve(t, aliases)
        if t.startswith("Ptr{"):
            s = a = 8
        elif t in J_SIZE:
            s = a = J_SIZE[t]
        elif t in structs:
            s, a, _ = j_layout(t, structs, aliases, cache)
        else:
            raise SystemExit("%s.%s: type %s is not an isbits type here" % (name, f, t))
        off = (off + a - 1) // a * a
        offsets[f] = off
        off += s
        align = max(align, a)
    size = (off + align - 1) // align * align
    cache[name] = (size, align, offsets)
    return cache[name]


# ------------------------------------------------------------------ checks

def main():
    jl_files = []
    for sub in ("src", "test"):
        for dp, _, fs in os.walk(os.path.join(PKG, sub)):
            jl_files += [os.path.join(dp, f) for f in sorted(fs) if f.endswith(".jl")]
    trees = {}
    for p in jl_files:
        tree, _ = parse_jl(p)
        trees[p] = tree
        for e in syntax_errors(tree):
            fail("%s: syntax error %s" % (os.path.relpath(p, PKG), e))
    print("parsed %d Julia files" % len(jl_files))

    gen = subprocess.run([sys.executable, os.path.join(HERE, "generate.py"), "--check",
                          "--header", HEADER, "--out", LIB_JL],
                         capture_output=True, text=True)
    if gen.returncode != 0:
        fail("generated layer is stale: " + gen.stderr.strip())

    typedefs, cstructs, cfuncs = parse_c()
    aliases, jstructs, opaque, consts, wrappers = julia_module(trees[LIB_JL])

    # 3. signatures
    seen = {}
    for p in jl_files:
        if not p.startswith(os.path.join(PKG, "src")):
            continue
        for fname, ptypes, ret, line in ccalls_in(trees[p], aliases):
            where = "%s:%d" % (os.path.relpath(p, PKG), line)
            if fname not in cfuncs:
                fail("%s: @ccall of %s, which the header does not declare" % (where, fname))
                continue
            seen[fname] = seen.get(fname, 0) + 1
            cret, cparams = cfuncs[fname]
            want = [c_canon(t, typedefs) for _, t in cparams]
            if len(want) != len(ptypes):
                fail("%s: %s takes %d arguments in C, %d in the @ccall" % (where, fname, len(want), len(ptypes)))
            for i, (w, g) in enumerate(zip(want, ptypes)):
                if w != g:
                    fail("%s: %s argument %d (%s) is %s in C, %s in Julia"
                         % (where, fname, i + 1, cparams[i][0], w, g))
            if c_canon(cret, typedefs) != ret:
                fail("%s: %s returns %s in C, %s in Julia" % (where, fname, c_canon(cret, typedefs), ret))
    for f, (_, params) in cfuncs.items():
        if seen.get(f, 0) != 1:
            fail("%s: %d @ccall wrappers (want 1)" % (f, seen.get(f, 0)))
        elif wrappers.get(f) != len(params):
            fail("%s: the wrapper takes %s parameters, C %d" % (f, wrappers.get(f), len(params)))
    print("checked %d @ccall signatures against %d C functions" % (sum(seen.values()), len(cfuncs)))

    # Opaque handle types.
    for name, t in typedefs.items():
        if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.Struct) and not t.type.decls:
            if name not in opaque:
                fail("opaque type %s has no `mutable struct %s end`" % (name, name))

    # 4. layouts
    clay = c_layouts(cstructs)
    cache = {}
    for s, fields in cstructs.items():
        if s not in jstructs:
            fail("struct %s is missing in Julia" % s)
            continue
        jf = [f.rstrip("_") if f.rstrip("_") != f and f.rstrip("_") in {x for x, _ in fields} else f
              for f, _ in jstructs[s]]
        if jf != [f for f, _ in fields]:
            fail("struct %s: fields %s in C, %s in Julia" % (s, [f for f, _ in fields], jf))
            continue
        for (f, ct), (_, jt) in zip(fields, jstructs[s]):
            if c_canon(ct, typedefs) != j_resolve(jt, aliases):
                fail("%s.%s is %s in C, %s in Julia" % (s, f, c_canon(ct, typedefs), j_resolve(jt, aliases)))
        size, align, offs = j_layout(s, jstructs, aliases, cache)
        csize, calign = clay[s]
        if (size, align) != (csize, calign):
            fail("struct %s: size/align %d/%d in C, %d/%d in Julia" % (s, csize, calign, size, align))
        for f, _ in fields:
            jo = offs.get(f, offs.get(f + "_"))
            if clay["%s.%s" % (s, f)][0] != jo:
                fail("%s.%s at offset %d in C, %s in Julia" % (s, f, clay["%s.%s" % (s, f)][0], jo))
    print("checked the layout of %d structs" % len(cstructs))

    # 5. constants
    for name, v in c_defines().items():
        if name not in consts:
            fail("constant %s is missing in Julia" % name)
        elif j_value(consts[name]) != v:
            fail("constant %s is %r in C, %r in Julia" % (name, v, j_value(consts[name])))

    # 6. names used through the module alias `L`, and the number of
    # arguments of each call of a wrapper or struct constructor through it
    defined = set(wrappers) | set(jstructs) | opaque | set(consts) | set(aliases) | {"libtensorasync"}
    used = calls = 0
    for p in jl_files:
        if p == LIB_JL:
            continue
        for n in walk(trees[p].root_node):
            if n.type == "field_expression" and txt(n.children[0]) == "L":
                used += 1
                name = txt(n.children[-1])
                if name not in defined:
                    fail("%s:%d: L.%s is not defined by LibTensorAsync"
                         % (os.path.relpath(p, PKG), n.start_point[0] + 1, name))
                parent = n.parent
                if parent is not None and parent.type == "call_expression" and parent.children[0] == n:
                    args = [c for c in parent.children[1].children if c.is_named]
                    want = wrappers.get(name, len(jstructs[name]) if name in jstructs else None)
                    if want is None:
                        continue
                    calls += 1
                    if any(a.type in ("splat_expression", "keyword_argument") or txt(a).endswith("...")
                           for a in args):
                        fail("%s:%d: L.%s called with a splat or keyword"
                             % (os.path.relpath(p, PKG), n.start_point[0] + 1, name))
                    elif len(args) != want:
                        fail("%s:%d: L.%s takes %d arguments, called with %d"
                             % (os.path.relpath(p, PKG), n.start_point[0] + 1, name, want, len(args)))
    print("checked %d uses of LibTensorAsync names, %d calls' argument counts" % (used, calls))

    if failures:
        print("\n".join("FAIL: " + f for f in failures))
        return 1
    print("Julia binding: ABI agreement OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
