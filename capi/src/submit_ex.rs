//! Reading a `ta_submit_ex` from the `ta_submit` inside it.

use std::mem::{offset_of, size_of};

use super::{ta_submit, ta_submit_ex};
use ta::{Error, Status};

/// The priority of the `ta_submit_ex` whose `submit` member `opts` is (its
/// flags have `TA_SUBMIT_EXTENDED`), after checking its `struct_size`.
pub(crate) fn priority(opts: *const ta_submit, origin: &'static str) -> Result<i32, Error> {
    let at = offset_of!(ta_submit_ex, submit);
    // SAFETY: with TA_SUBMIT_EXTENDED set, `opts` is the `submit` member of
    // a readable `ta_submit_ex` by the C contract, which starts `at` bytes
    // earlier; only `struct_size` is read before it is checked.
    let ex = unsafe { opts.cast::<u8>().sub(at) }.cast::<ta_submit_ex>();
    // SAFETY: see above; `struct_size` is the first field.
    let size = unsafe { std::ptr::addr_of!((*ex).struct_size).read() } as usize;
    let known = size_of::<ta_submit_ex>();
    if size < known {
        return Err(Error::new(
            Status::InvalidArgument,
            origin,
            format!(
                "opts is a ta_submit_ex (TA_SUBMIT_EXTENDED) whose struct_size is {size}, expected at least {known}"
            ),
        ));
    }
    // SAFETY: the caller's struct is `size` bytes long by the C contract.
    let extra = unsafe { std::slice::from_raw_parts(ex.cast::<u8>().add(known), size - known) };
    if let Some(i) = extra.iter().position(|&b| b != 0) {
        return Err(Error::new(
            Status::InvalidArgument,
            origin,
            format!(
                "opts is a ta_submit_ex whose struct_size is {size}: byte {} is set, but this version of the library knows only the first {known} bytes (a field it does not know is in use)",
                known + i
            ),
        ));
    }
    // SAFETY: the struct is at least this version's size (checked above).
    Ok(unsafe { std::ptr::addr_of!((*ex).priority).read() })
}
