// The library's kernels are `pub(crate)`, so the kernel benches
// compile their sources into themselves, on top of the library's
// `internals` (feature of test and bench builds): these are the modules the
// kernel sources refer to as `crate::...`.
// Included at the root of each kernel bench (`include!`); the `#[path]` is
// relative to this file.
#[allow(unused_imports)]
mod dtype {
    pub use tensorasync::internals::dtype::*;
}
#[allow(unused_imports)]
mod error {
    pub use tensorasync::internals::error::*;
}
#[allow(unused_imports)]
mod layout {
    pub use tensorasync::internals::layout::*;
}
#[allow(unused_imports)]
mod resolved {
    pub use tensorasync::ResolvedView;
}
#[allow(dead_code, unused_imports)]
#[path = "../../src/kernels/mod.rs"]
mod kernels;
