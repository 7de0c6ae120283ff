//! The checked-in C header is exactly what cbindgen generates from the
//! sources, documents every function, agrees with the Rust constants, and
//! compiles as C99 and C++17 (SPEC §3).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod cabi;

use ta::{DType, Status};

const CBINDGEN_VERSION: &str = "0.29.4";

/// The C crate's directory (cbindgen's configuration).
fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The repository's top (the header lives in include/).
fn root() -> PathBuf {
    crate_dir().join("..")
}

fn header() -> String {
    std::fs::read_to_string(root().join("include/tensorasync.h")).unwrap()
}

#[test]
fn header_is_up_to_date() {
    let v = Command::new("cbindgen").arg("--version").output().unwrap_or_else(|e| {
        panic!(
            "cbindgen {CBINDGEN_VERSION} is needed (cargo install cbindgen --version {CBINDGEN_VERSION} --locked): {e}"
        )
    });
    let v = String::from_utf8_lossy(&v.stdout);
    assert!(v.contains(CBINDGEN_VERSION), "cbindgen {CBINDGEN_VERSION} is pinned, found {v}");
    let out = std::env::temp_dir().join(format!("tensorasync-{}.h", std::process::id()));
    let st = Command::new("cbindgen")
        .current_dir(crate_dir())
        .args(["--quiet", "--config", "cbindgen.toml", "--output"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    let fresh = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    assert!(
        fresh == header(),
        "include/tensorasync.h is out of date: run `cbindgen --config cbindgen.toml --output include/tensorasync.h`"
    );
}

/// `#define NAME VALUE` lines of the header.
fn defines(h: &str) -> HashMap<String, String> {
    h.lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

#[test]
fn constants_match_the_rust_values() {
    let d = defines(&header());
    assert_eq!(d["TA_VERSION_STRING"], format!("\"{}\"", env!("CARGO_PKG_VERSION")));
    assert_eq!(d["TA_VERSION_MAJOR"], env!("CARGO_PKG_VERSION_MAJOR"));
    assert_eq!(d["TA_VERSION_MINOR"], env!("CARGO_PKG_VERSION_MINOR"));
    assert_eq!(d["TA_VERSION_PATCH"], env!("CARGO_PKG_VERSION_PATCH"));
    assert_eq!(d["TA_DOMAIN_HOST"], format!("({})", tensorasync_ffi::TA_DOMAIN_HOST));
    assert_eq!(d["TA_WAIT_FOREVER"], format!("({})", tensorasync_ffi::TA_WAIT_FOREVER));
    let statuses: Vec<_> = d.keys().filter(|k| k.starts_with("TA_STATUS_")).collect();
    assert_eq!(statuses.len(), Status::ALL.len(), "every status has a define, and no more");
    // Against the library's status table (ta_status_name reads it).
    for s in Status::ALL {
        let v = *s as u32;
        // SAFETY: ta_status_name returns a static NUL-terminated string.
        let name = unsafe { std::ffi::CStr::from_ptr(cabi::ta_status_name(v)) }.to_str().unwrap();
        assert_eq!(d[name], v.to_string(), "{name}");
    }
    for t in DType::ALL {
        let name = format!("TA_DTYPE_{}", t.name().to_uppercase());
        assert_eq!(d[&name], (*t as u32).to_string(), "{name}");
    }
    for (name, mode) in
        [("TA_MODE_READ", ta::Mode::Read), ("TA_MODE_WRITE", ta::Mode::Write), ("TA_MODE_UPDATE", ta::Mode::Update)]
    {
        assert_eq!(d[name], (mode as u32).to_string());
    }
}

#[test]
fn every_function_is_documented() {
    let h = header();
    let lines: Vec<&str> = h.lines().collect();
    let mut count = 0;
    for (i, l) in lines.iter().enumerate() {
        let is_decl = l.contains("ta_")
            && l.contains('(')
            && !l.starts_with(' ')
            && !l.starts_with("typedef")
            && !l.starts_with("#")
            && !l.starts_with('*')
            && !l.starts_with("/");
        if is_decl {
            count += 1;
            assert!(i > 0 && lines[i - 1].trim() == "*/", "undocumented function: {l}");
        }
    }
    assert!(count >= 40, "found only {count} functions");
}

fn compile(compiler: &str, args: &[&str], file: &Path) {
    let out = Command::new(compiler)
        .args(args)
        .arg(format!("-I{}", root().join("include").display()))
        .arg("-fsyntax-only")
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{compiler} not found: {e}"));
    assert!(out.status.success(), "{compiler} {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn header_compiles_as_c99_and_cpp17() {
    let dir = std::env::temp_dir().join(format!("tensorasync-hdr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = "#include \"tensorasync.h\"\nint main(void) { ta_tensor *t = 0; (void)t; return ta_status_name(TA_STATUS_OK) == 0; }\n";
    let c = dir.join("h.c");
    let cpp = dir.join("h.cpp");
    std::fs::write(&c, src).unwrap();
    std::fs::write(&cpp, src).unwrap();
    compile("gcc", &["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"], &c);
    compile("g++", &["-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic"], &cpp);
    let _ = std::fs::remove_dir_all(&dir);
}
