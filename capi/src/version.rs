//! Version reporting. The macros equal the version in Cargo.toml (a test checks).

use std::ffi::c_char;

/// Major version of the library.
pub const TA_VERSION_MAJOR: u32 = 0;
/// Minor version of the library.
pub const TA_VERSION_MINOR: u32 = 1;
/// Patch version of the library.
pub const TA_VERSION_PATCH: u32 = 0;
/// Version string of the library.
pub const TA_VERSION_STRING: &str = "0.1.0";

static VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// The library version as a static NUL-terminated string (`"MAJOR.MINOR.PATCH"`),
/// equal to `TA_VERSION_STRING` for a matching header. Never fails.
#[no_mangle]
pub extern "C" fn ta_version() -> *const c_char {
    crate::guard_value(std::ptr::null(), || VERSION.as_ptr().cast())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_match_cargo() {
        assert_eq!(TA_VERSION_STRING, env!("CARGO_PKG_VERSION"));
        assert_eq!(TA_VERSION_MAJOR.to_string(), env!("CARGO_PKG_VERSION_MAJOR"));
        assert_eq!(TA_VERSION_MINOR.to_string(), env!("CARGO_PKG_VERSION_MINOR"));
        assert_eq!(TA_VERSION_PATCH.to_string(), env!("CARGO_PKG_VERSION_PATCH"));
        let s = unsafe { std::ffi::CStr::from_ptr(ta_version()) };
        assert_eq!(s.to_str().unwrap(), TA_VERSION_STRING);
    }
}
