//! Link settings for the shared library: a SONAME so that programs link against
//! the ABI major version, and a version script so that only `ta_*` symbols are
//! exported.
fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
    println!("cargo:rerun-if-changed=tensorasync.map");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtensorasync.so.{major}");
        println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={manifest}/tensorasync.map");
    }
}
