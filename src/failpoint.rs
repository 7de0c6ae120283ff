//! Allocation failpoints, for tests of the out-of-memory paths.
//!
//! Rust's allocations do not fail (an allocation failure aborts), so the
//! library's fallible allocation sites are marked with `hit`: in a build
//! with the `failpoints` feature a test can make the n-th allocation at a
//! site on its own thread fail (`fail_nth`), and the site then returns
//! `TA_STATUS_OUT_OF_MEMORY` as a real allocation failure would. Without the
//! feature `hit` is a constant `false` and costs nothing.
//!
//! The sites, all before anything is enrolled:
//! - [`Site::Task`]: the task of a submission;
//! - [`Site::Event`]: the event of a submission that asked for one;
//! - [`Site::Handle`]: a new handle (for a submission's event, taken before
//!   the operation is enrolled, see `handles::reserve`);
//! - [`Site::Region`]: the region of a view that is not a simple span (made
//!   when the view is made).

use crate::error::{Error, Status};

/// An allocation site (see the module notes).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Site {
    Task = 0,
    Event = 1,
    // Made by the C crate's handle table (in `failpoints` builds).
    #[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
    Handle = 2,
    Region = 3,
}

/// The error of a failed allocation at `site`.
pub(crate) fn out_of_memory(site: Site, origin: &'static str) -> Error {
    let what = match site {
        Site::Task => "the operation's task",
        Site::Event => "the operation's event",
        Site::Handle => "a handle",
        Site::Region => "the view's region",
    };
    Error::new(Status::OutOfMemory, origin, format!("out of memory allocating {what}"))
}

#[cfg(feature = "failpoints")]
mod armed {
    use std::cell::Cell;

    thread_local! {
        /// Per site: 0 = disarmed, n = the n-th allocation from now fails.
        pub(super) static COUNTDOWN: [Cell<u32>; 4] = const { [const { Cell::new(0) }; 4] };
    }
}

/// Make the `n`-th allocation at `site` on this thread fail (counting from
/// 1; 0 disarms the site). Each armed site fails once, then disarms.
#[cfg(feature = "failpoints")]
pub fn fail_nth(site: Site, n: u32) {
    armed::COUNTDOWN.with(|c| c[site as usize].set(n));
}

/// Whether the site is still armed on this thread (its failure not yet reached).
#[cfg(feature = "failpoints")]
pub fn armed(site: Site) -> bool {
    armed::COUNTDOWN.with(|c| c[site as usize].get() != 0)
}

/// Whether this allocation at `site` fails (see [`fail_nth`]).
#[cfg(feature = "failpoints")]
pub fn hit(site: Site) -> bool {
    armed::COUNTDOWN.with(|c| {
        let c = &c[site as usize];
        match c.get() {
            0 => false,
            1 => {
                c.set(0);
                true
            }
            n => {
                c.set(n - 1);
                false
            }
        }
    })
}

/// Without the `failpoints` feature no allocation site fails.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_site: Site) -> bool {
    false
}
