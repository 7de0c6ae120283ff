#!/usr/bin/env python3
"""Generate bindings/fortran/tensorasync_c.f90 from include/tensorasync.h.

The output is module `tensorasync_c`: every constant of the header as a
Fortran parameter, every struct with a body as a bind(c) derived type, and
every function as a bind(c) interface named `c_<function>` (so that the
idiomatic module `tensorasync` can use the C names for its own procedures).

Argument mapping (C -> Fortran dummy):
  integer typedefs, size_t, ptrdiff_t, intN_t, int, double  -> integer/real(kind), value
  struct passed by value (ta_scalar)                         -> type(ta_x), value
  pointer to an opaque handle, void *, char *                -> type(c_ptr), value
  pointer to a pointer (handle out parameters)               -> type(c_ptr), optional (absent = NULL)
  pointer to an integer, NAME_out without a `cap` after it   -> integer(kind), optional (scalar)
  other pointers to integers                                 -> integer(kind), optional :: x(*)
  pointer to a struct: an array when a count/cap follows     -> type(ta_x), optional :: x(*)
                       else one struct                       -> type(ta_x), optional
                       (intent(out) for NAME_out, intent(inout) for other non-const ones)
  function pointer typedefs                                  -> type(c_funptr), value
Optional dummies of a bind(c) interface are passed as NULL when absent
(Fortran 2018). `const` pointers are intent(in).

Usage: gen_interfaces.py [--header PATH] [--output PATH] [--check]
  --check  exit 1 (and say so) when the output file differs from what the
           header gives, instead of writing it.
"""
import argparse
import difflib
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# C scalar type -> (Fortran type, kind)
BASE = {
    "size_t": "integer(c_size_t)",
    "ptrdiff_t": "integer(c_ptrdiff_t)",
    "int64_t": "integer(c_int64_t)",
    "uint64_t": "integer(c_int64_t)",
    "int32_t": "integer(c_int32_t)",
    "uint32_t": "integer(c_int32_t)",
    "int16_t": "integer(c_int16_t)",
    "uint16_t": "integer(c_int16_t)",
    "int8_t": "integer(c_int8_t)",
    "uint8_t": "integer(c_int8_t)",
    "int": "integer(c_int)",
    "double": "real(c_double)",
    "float": "real(c_float)",
    "char": "character(kind=c_char)",
    "bool": "logical(c_bool)",
}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


class Header:
    def __init__(self, text):
        self.scalars = {}  # typedef name -> C base type
        self.funptrs = set()
        self.opaque = set()
        self.structs = []  # (name, [(ctype, field)])
        self.struct_names = set()
        self.constants = []  # (name, value)
        self.functions = []  # (ret, name, [(ctype, pname)])
        self.parse(text)

    def parse(self, raw):
        for m in re.finditer(r"^#define\s+(TA_\w+)\s+(.+?)\s*$", raw, flags=re.M):
            self.constants.append((m.group(1), m.group(2)))
        text = strip_comments(raw)
        text = re.sub(r"^#.*$", "", text, flags=re.M)
        text = text.replace('extern "C" {', "").replace('}  ', "}")
        # typedef struct X { ... } X;
        for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", text, flags=re.S):
            fields = []
            for decl in m.group(2).split(";"):
                decl = " ".join(decl.split())
                if not decl:
                    continue
                fp = re.match(r"(.+?)\(\s*\*\s*(\w+)\s*\)\s*\(.*\)$", decl)
                if fp:
                    fields.append(("@funptr", fp.group(2)))
                    continue
                fm = re.match(r"(.+?)(\w+)\s*$", decl)
                fields.append((fm.group(1).strip(), fm.group(2)))
            self.structs.append((m.group(3), fields))
            self.struct_names.add(m.group(3))
        text_nostruct = re.sub(r"typedef\s+struct\s+(\w+)\s*\{.*?\}\s*\w+\s*;", "", text, flags=re.S)
        for m in re.finditer(r"typedef\s+struct\s+(\w+)\s+(\w+)\s*;", text_nostruct):
            self.opaque.add(m.group(2))
        for m in re.finditer(r"typedef\s+[^;()]*\(\s*\*\s*(\w+)\s*\)\s*\([^;]*\)\s*;", text_nostruct, flags=re.S):
            self.funptrs.add(m.group(1))
        for m in re.finditer(r"typedef\s+(\w+)\s+(\w+)\s*;", text_nostruct):
            if m.group(1) != "struct":
                self.scalars[m.group(2)] = m.group(1)
        body = re.sub(r"typedef[^;]*;", "", text_nostruct, flags=re.S)
        for m in re.finditer(r"([\w\s\*]+?)\b(ta_\w+)\s*\(([^)]*)\)\s*;", body, flags=re.S):
            ret = " ".join(m.group(1).split())
            params = []
            args = " ".join(m.group(3).split())
            if args and args != "void":
                for a in args.split(","):
                    pm = re.match(r"(.+?)(\w+)\s*$", a.strip())
                    params.append((" ".join(pm.group(1).split()), pm.group(2)))
            self.functions.append((ret, m.group(2), params))

    def resolve(self, t):
        """Strip const/struct; resolve integer typedefs to their base type."""
        t = t.replace("const", "").replace("struct", "").strip()
        while t in self.scalars:
            t = self.scalars[t]
        return t


# Constants used for 64-bit arguments (timeouts, 64-bit flag fields).
KIND64 = ("TA_WAIT_FOREVER", "TA_DL_FLAG_")


def fortran_value(value, name=""):
    v = value.strip()
    if v.startswith('"'):
        return "character(len=*), parameter", v
    v = v.strip("()")
    if re.fullmatch(r"-?\d+", v):
        n = int(v)
        kind = "c_int32_t" if -(2**31) <= n < 2**31 else "c_int64_t"
        if name.startswith(KIND64):
            kind = "c_int64_t"
        return "integer(%s), parameter" % kind, "%d_%s" % (n, kind)
    m = re.fullmatch(r"(-?\d+)[uU]?[lL]*", v)
    if m:
        return "integer(c_int64_t), parameter", "%s_c_int64_t" % m.group(1)
    return None, None


def wrap(line, indent):
    """Wrap a free-form line at 100 columns with continuation ampersands."""
    out, cur = [], line
    while len(cur) > 100:
        cut = cur.rfind(", ", 0, 98)
        if cut <= len(indent):
            break
        out.append(cur[: cut + 1] + " &")
        cur = indent + "    " + cur[cut + 2 :]
    out.append(cur)
    return "\n".join(out)


def field_decl(h, ctype, name):
    if ctype == "@funptr":
        return "type(c_funptr) :: %s" % name
    if "*" in ctype:
        return "type(c_ptr) :: %s" % name
    base = h.resolve(ctype)
    if base in h.struct_names:
        return "type(%s) :: %s" % (base, name)
    if base in h.funptrs:
        return "type(c_funptr) :: %s" % name
    return "%s :: %s" % (BASE[base], name)


def dummy_decl(h, ctype, name, params, index):
    stars = ctype.count("*")
    const = "const" in ctype
    base = h.resolve(ctype.replace("*", ""))
    if stars == 0:
        if base in h.struct_names:
            return "type(%s), value :: %s" % (base, name)
        if base in h.funptrs:
            return "type(c_funptr), value :: %s" % name
        return "%s, value :: %s" % (BASE[base], name)
    if stars >= 2:
        return "type(c_ptr), optional :: %s" % name
    # one level of pointer
    if base in h.opaque or base in ("void", "char"):
        return "type(c_ptr), value :: %s" % name
    nxt = params[index + 1][1] if index + 1 < len(params) else ""
    counted = nxt == "cap" or nxt.startswith("n") and nxt != "name"
    intent = "intent(in)" if const else "intent(inout)"
    if base in h.struct_names:
        if counted:
            return "type(%s), %s, optional :: %s(*)" % (base, intent, name)
        # A size-prefixed struct (its first field is struct_size) is read by
        # the callee even as an output: intent(inout), not intent(out).
        sized = any(f == "struct_size" for _, f in dict(h.structs).get(base, []))
        out = name.endswith("_out") and not sized
        intent = "intent(in)" if const else ("intent(out)" if out else "intent(inout)")
        return "type(%s), %s, optional :: %s" % (base, intent, name)
    if name.endswith("_out") and nxt != "cap":
        return "%s, intent(out), optional :: %s" % (BASE[base], name)
    return "%s, %s, optional :: %s(*)" % (BASE[base], intent, name)


def generate(h, header_name):
    L = []
    L.append("! Generated by bindings/fortran/gen_interfaces.py from %s; do not edit." % header_name)
    L.append("! Regenerate: python3 bindings/fortran/gen_interfaces.py")
    L.append("!")
    L.append("! The C ABI of tensorasync as bind(c) interfaces: constants, structs, and")
    L.append("! one interface `c_<name>` per C function (see that function in the header).")
    L.append("module tensorasync_c")
    L.append("  use, intrinsic :: iso_c_binding")
    L.append("  implicit none")
    L.append("  public")
    L.append("")
    for name, value in h.constants:
        decl, v = fortran_value(value, name)
        if decl:
            L.append("  %s :: %s = %s" % (decl, name, v))
    L.append("")
    for name, fields in h.structs:
        L.append("  type, bind(c) :: %s" % name)
        for ctype, fname in fields:
            L.append("    " + field_decl(h, ctype, fname))
        L.append("  end type %s" % name)
        L.append("")
    L.append("  interface")
    for ret, name, params in h.functions:
        names = ", ".join(p[1] for p in params)
        rbase = h.resolve(ret.replace("*", ""))
        if "*" in ret:
            rtype = "type(c_ptr)"
        elif rbase == "void":
            rtype = None
        else:
            rtype = BASE[rbase]
        kind = "function" if rtype else "subroutine"
        head = "    %s c_%s(%s) bind(c, name='%s')" % (kind, name, names, name)
        L.append(wrap(head, "    "))
        imports = sorted({h.resolve(p[0].replace("*", "")) for p in params} & h.struct_names)
        L.append("      use, intrinsic :: iso_c_binding")
        if imports:
            L.append("      import :: " + ", ".join(imports))
        L.append("      implicit none")
        for i, (ctype, pname) in enumerate(params):
            L.append("      " + dummy_decl(h, ctype, pname, params, i))
        if rtype:
            L.append("      %s :: c_%s" % (rtype, name))
        L.append("    end %s c_%s" % (kind, name))
    L.append("  end interface")
    L.append("end module tensorasync_c")
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--header", default=os.path.join(ROOT, "include", "tensorasync.h"))
    ap.add_argument("--output", default=os.path.join(HERE, "tensorasync_c.f90"))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    with open(args.header) as f:
        h = Header(f.read())
    text = generate(h, "include/tensorasync.h")
    if args.check:
        try:
            with open(args.output) as f:
                old = f.read()
        except FileNotFoundError:
            old = ""
        if old != text:
            sys.stdout.writelines(
                difflib.unified_diff(old.splitlines(True), text.splitlines(True), args.output, "generated"))
            print("%s is stale: run python3 bindings/fortran/gen_interfaces.py" % args.output, file=sys.stderr)
            return 1
        print("%s is up to date (%d functions, %d structs, %d constants)"
              % (os.path.relpath(args.output, ROOT), len(h.functions), len(h.structs), len(h.constants)))
        return 0
    with open(args.output, "w") as f:
        f.write(text)
    print("wrote %s (%d functions)" % (args.output, len(h.functions)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
