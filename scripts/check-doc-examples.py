#!/usr/bin/env python3
"""Fails when a public item of the core crate has no code example in its docs.

The public items are what `cargo doc` shows: everything reachable from the
crate root through public paths (re-exports followed, `#[doc(hidden)]` items
left out), read from rustdoc's JSON output (nightly):
  - structs, enums, unions, traits, type aliases, free functions, macros,
    free consts and statics;
  - the public methods and associated consts of their inherent impls;
  - the methods declared by public traits.
Modules, fields, enum variants and trait impls (`impl Stream for ...`) are not
counted: their docs are the type's.

An example is a fenced Rust block that is not `ignore`, `compile_fail` or a
non-Rust language (`text`, `c`, `sh`, ...). A `no_run` block counts only for
the items listed in NO_RUN_ALLOWED, with the reason running is impossible.

Usage:
  check-doc-examples.py            build the JSON (target/doc-json) and check
  check-doc-examples.py FILE.json  check an existing JSON file
  check-doc-examples.py --self-test
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

CRATE = "tensorasync"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# path -> why its example cannot run.
NO_RUN_ALLOWED = {}

# path -> why it has no example yet. Listed, not failed; an entry that has
# gained an example (or is gone) fails the check, so the list only shrinks.
EXEMPT = {
}

RUST_TOKENS = {
    "rust", "should_panic", "no_run", "ignore", "compile_fail", "test_harness",
    "standalone_crate", "allow_fail",
}


def code_blocks(docs):
    """Yields the info-string tokens of each fenced block in a Markdown text."""
    fence = None
    for line in docs.splitlines():
        s = line.strip()
        if fence is None:
            m = re.match(r"(`{3,}|~{3,})(.*)$", s)
            if m:
                fence = m.group(1)
                info = m.group(2).strip().strip("{}")
                yield [t for t in re.split(r"[\s,]+", info) if t]
        elif s.startswith(fence) and s.strip(fence[0]) == "":
            fence = None


def example_kind(docs):
    """'run' if the docs hold a runnable Rust example, 'no_run' if only
    no_run ones, None if none."""
    best = None
    for tokens in code_blocks(docs or ""):
        other = [t for t in tokens if t not in RUST_TOKENS and not t.startswith(("edition", "ignore-", "."))]
        if other and "rust" not in tokens:
            continue  # text, c, sh, ...
        if "ignore" in tokens or any(t.startswith("ignore-") for t in tokens) or "compile_fail" in tokens:
            continue
        if "no_run" in tokens:
            best = best or "no_run"
        else:
            return "run"
    return best


def kind_of(item):
    return next(iter(item["inner"]))


def public_items(doc):
    """(path, kind, docs) of every public item, each once, by its shortest path."""
    ix = doc["index"]
    root = str(doc["root"])
    out = {}
    # Each entry: (id, path, docs of the re-exports that led there). rustdoc
    # shows a re-export's own docs above the item's when it inlines it.
    queue = [(root, CRATE, "")]
    seen_modules = set()

    def record(iid, path, kind, extra=""):
        if iid not in out:
            out[iid] = (path, kind, extra + "\n" + (ix[iid].get("docs") or ""))

    while queue:
        iid, path, extra = queue.pop(0)
        item = ix.get(iid)
        if item is None or item["crate_id"] != 0:
            continue  # another crate's item (a re-exported crate, say)
        kind = kind_of(item)
        inner = item["inner"][kind]
        if kind == "module":
            if iid in seen_modules:
                continue
            seen_modules.add(iid)
            for child in inner["items"]:
                c = ix.get(str(child))
                if c is None or c["crate_id"] != 0:
                    continue
                if kind_of(c) == "use":
                    u = c["inner"]["use"]
                    if u["id"] is None:
                        continue
                    if u["is_glob"]:
                        queue.append((str(u["id"]), path, ""))
                    else:
                        queue.append((str(u["id"]), f"{path}::{u['name']}", c.get("docs") or ""))
                elif c.get("name") is not None and kind_of(c) != "impl":
                    queue.append((str(child), f"{path}::{c['name']}", ""))
        elif kind in ("struct", "enum", "union"):
            record(iid, path, kind, extra)
            for impl_id in inner["impls"]:
                impl = ix[str(impl_id)]["inner"]["impl"]
                if impl["trait"] is not None or impl["is_synthetic"] or impl["blanket_impl"] is not None:
                    continue
                for m in impl["items"]:
                    mi = ix[str(m)]
                    mk = kind_of(mi)
                    if mi["visibility"] == "public" and mk in ("function", "assoc_const"):
                        record(str(m), f"{path}::{mi['name']}", "method" if mk == "function" else mk)
        elif kind == "trait":
            record(iid, path, kind, extra)
            for m in inner["items"]:
                mi = ix[str(m)]
                if kind_of(mi) == "function":
                    record(str(m), f"{path}::{mi['name']}", "trait method")
        elif kind in ("function", "type_alias", "constant", "static", "macro"):
            record(iid, path, kind, extra)
    return sorted(out.values())


def check(doc, exempt=None):
    """Returns (items, missing, no_run-only not allowed, exempt and missing,
    stale exemptions)."""
    exempt = EXEMPT if exempt is None else exempt
    items = public_items(doc)
    missing, bad_no_run, exempted = [], [], []
    for path, kind, docs in items:
        k = example_kind(docs)
        if k is None:
            (exempted if path in exempt else missing).append(f"{path} ({kind})")
        elif k == "no_run" and path not in NO_RUN_ALLOWED:
            bad_no_run.append(f"{path} ({kind})")
    stale = sorted(set(exempt) - {e.rsplit(" (", 1)[0] for e in exempted})
    return items, missing, bad_no_run, exempted, stale


def build_json():
    target = os.path.join(REPO, "target", "doc-json")
    env = dict(os.environ, CARGO_TARGET_DIR=target)
    subprocess.run(
        ["cargo", "+nightly", "rustdoc", "-q", "-p", CRATE, "--lib", "--",
         "-Z", "unstable-options", "--output-format", "json"],
        cwd=REPO, env=env, check=True)
    return os.path.join(target, "doc", f"{CRATE}.json")


def self_test():
    """Checks the checker against a small crate with known gaps."""
    src = r'''
//! Fixture.
mod private {
    /// Reached through the re-export only, no example.
    pub fn reexported() {}
    /// Not reachable: no report.
    pub fn unreachable() {}
}
pub use private::reexported;
mod private2 {
    /// Its example is on the re-export.
    pub struct Documented;
}
/// ```
/// let _ = tensorasync::Documented;
/// ```
pub use private2::Documented;
/// Has one.
///
/// ```
/// assert_eq!(1 + 1, 2);
/// ```
pub fn good() {}
/// Text only.
///
/// ```text
/// not code
/// ```
pub fn text_only() {}
/// Ignored only.
///
/// ```ignore
/// good();
/// ```
pub fn ignored() {}
/// no_run only.
///
/// ```no_run
/// good();
/// ```
pub fn no_run_only() {}
/// A type with an example.
///
/// ```
/// let _ = 0;
/// ```
pub struct S;
impl S {
    /// Method without example.
    pub fn bare(&self) {}
    /// Method with one.
    ///
    /// ```rust,should_panic
    /// panic!();
    /// ```
    pub fn fine(&self) {}
    #[doc(hidden)]
    pub fn hidden(&self) {}
    fn private(&self) {}
}
impl Clone for S { fn clone(&self) -> S { S } }
/// A trait without example.
pub trait T {
    /// Declared method without example.
    fn m(&self);
}
#[doc(hidden)]
pub fn hidden_fn() {}
/// No example.
pub const C: u32 = 1;
pub mod m {
    /// ```
    /// let _ = 1;
    /// ```
    pub struct Inner;
}
'''
    tmp = tempfile.mkdtemp()
    try:
        lib = os.path.join(tmp, "lib.rs")
        with open(lib, "w") as f:
            f.write(src)
        subprocess.run(
            ["rustdoc", "+nightly", "--edition", "2021", "--crate-type", "lib", "--crate-name", CRATE,
             "-Z", "unstable-options", "--output-format", "json", "-o", tmp, lib],
            check=True)
        with open(os.path.join(tmp, f"{CRATE}.json")) as f:
            doc = json.load(f)
    finally:
        shutil.rmtree(tmp)
    items, missing, bad_no_run, exempted, stale = check(
        doc, {"tensorasync::ignored": "fixture", "tensorasync::good": "fixture: stale"})
    want_missing = sorted([
        "tensorasync::reexported (function)", "tensorasync::text_only (function)",
        "tensorasync::S::bare (method)", "tensorasync::T (trait)",
        "tensorasync::T::m (trait method)", "tensorasync::C (constant)",
    ])
    ok = True
    if sorted(missing) != want_missing:
        print(f"self-test: missing {sorted(missing)}, want {want_missing}")
        ok = False
    if exempted != ["tensorasync::ignored (function)"] or stale != ["tensorasync::good"]:
        print(f"self-test: exempted {exempted}, stale {stale}")
        ok = False
    if bad_no_run != ["tensorasync::no_run_only (function)"]:
        print(f"self-test: no_run-only {bad_no_run}")
        ok = False
    paths = {p for p, _, _ in items}
    if paths != {"tensorasync::" + n for n in
                 ["reexported", "Documented", "good", "text_only", "ignored", "no_run_only", "S", "S::bare", "S::fine",
                  "T", "T::m", "C", "m::Inner"]}:
        print(f"self-test: items {sorted(paths)}")
        ok = False
    print("self-test:", "ok" if ok else "FAILED")
    return ok


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(0 if self_test() else 1)
    path = sys.argv[1] if len(sys.argv) > 1 else build_json()
    with open(path) as f:
        doc = json.load(f)
    items, missing, bad_no_run, exempted, stale = check(doc)
    with_examples = len(items) - len(missing) - len(bad_no_run) - len(exempted)
    print(f"{CRATE}: {len(items)} public items (rustdoc JSON format {doc['format_version']}), "
          f"{with_examples} with a runnable example, {len(exempted)} exempt")
    for m in exempted:
        print(f"  exempt, no example: {m}: {EXEMPT[m.rsplit(' (', 1)[0]]}")
    for m in missing:
        print(f"  no example: {m}")
    for m in bad_no_run:
        print(f"  only a no_run example: {m}")
    for m in stale:
        print(f"  stale exemption (has an example now, or is gone): {m}")
    sys.exit(1 if missing or bad_no_run or stale else 0)


if __name__ == "__main__":
    main()
