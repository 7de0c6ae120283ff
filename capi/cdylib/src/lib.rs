//! `libtensorasync.so` and `libtensorasync.a`: the C ABI's exported
//! functions, defined in the `tensorasync-ffi` crate, linked into the C
//! libraries. Linking the crate is enough: its `ta_*` functions are
//! `#[no_mangle] extern "C"`, so they are the libraries' exported symbols
//! (the version script in build.rs keeps only those), and its global
//! allocator and load-time hook come with it.

pub use ffi::*;
