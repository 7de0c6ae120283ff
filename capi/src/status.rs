//! The status table: each core [`Status`], its `ta_status` value and its C
//! name, in one place. The values are the `TA_STATUS_*` constants (which
//! cbindgen writes into the header; a test checks the header against this
//! table), the names are those constants' names.

use std::ffi::CStr;

use ta::Status;

use crate::types::*;

macro_rules! status_table {
    ($($status:ident => $c:ident),* $(,)?) => {
        /// Every status with its C value and name, in value order.
        #[cfg(test)]
        pub(crate) const TABLE: &[(Status, ta_status, &str)] = &[$((Status::$status, $c, stringify!($c))),*];

        /// The C value of a status.
        #[inline]
        pub(crate) fn to_c(s: Status) -> ta_status {
            match s {
                $(Status::$status => $c,)*
            }
        }

        /// The status with this C value, if any.
        pub(crate) fn from_c(v: ta_status) -> Option<Status> {
            match v {
                $($c => Some(Status::$status),)*
                _ => None,
            }
        }

        /// The C name of a status value (`TA_STATUS_...`), if it is one.
        pub(crate) fn name(v: ta_status) -> Option<&'static CStr> {
            match v {
                $($c => Some(
                    // A literal that ends in its only NUL.
                    match CStr::from_bytes_with_nul(concat!(stringify!($c), "\0").as_bytes()) {
                        Ok(s) => s,
                        Err(_) => unreachable!(),
                    },
                ),)*
                _ => None,
            }
        }
    };
}

status_table! {
    Ok => TA_STATUS_OK,
    Pending => TA_STATUS_PENDING,
    Timeout => TA_STATUS_TIMEOUT,
    NullHandle => TA_STATUS_NULL_HANDLE,
    StaleHandle => TA_STATUS_STALE_HANDLE,
    DoubleFree => TA_STATUS_DOUBLE_FREE,
    WrongHandleType => TA_STATUS_WRONG_HANDLE_TYPE,
    InvalidHandle => TA_STATUS_INVALID_HANDLE,
    NullPointer => TA_STATUS_NULL_POINTER,
    InvalidArgument => TA_STATUS_INVALID_ARGUMENT,
    DtypeMismatch => TA_STATUS_DTYPE_MISMATCH,
    ShapeMismatch => TA_STATUS_SHAPE_MISMATCH,
    DomainMismatch => TA_STATUS_DOMAIN_MISMATCH,
    ReadOnly => TA_STATUS_READ_ONLY,
    Alias => TA_STATUS_ALIAS,
    Unconstructed => TA_STATUS_UNCONSTRUCTED,
    ShapeUnknown => TA_STATUS_SHAPE_UNKNOWN,
    Unsupported => TA_STATUS_UNSUPPORTED,
    OutOfRange => TA_STATUS_OUT_OF_RANGE,
    BufferTooSmall => TA_STATUS_BUFFER_TOO_SMALL,
    NotContiguous => TA_STATUS_NOT_CONTIGUOUS,
    KernelFailed => TA_STATUS_KERNEL_FAILED,
    Cancelled => TA_STATUS_CANCELLED,
    Shutdown => TA_STATUS_SHUTDOWN,
    WouldDeadlock => TA_STATUS_WOULD_DEADLOCK,
    OutOfMemory => TA_STATUS_OUT_OF_MEMORY,
    Panic => TA_STATUS_PANIC,
    NoBackend => TA_STATUS_NO_BACKEND,
    AlreadyFinished => TA_STATUS_ALREADY_FINISHED,
    CudaUnavailable => TA_STATUS_CUDA_UNAVAILABLE,
    CudaError => TA_STATUS_CUDA_ERROR,
    Internal => TA_STATUS_INTERNAL,
}

/// The C name of `s`, for the core's trace output.
pub(crate) fn name_of(s: Status) -> &'static str {
    name(to_c(s)).and_then(|n| n.to_str().ok()).unwrap_or("TA_STATUS_UNKNOWN")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table covers every core status once, in value order, and its
    /// conversions and names agree with it. The core still numbers its
    /// statuses (a kernel's failure code defaults to its status's number):
    /// those numbers are the C values.
    #[test]
    fn the_table_is_complete_and_consistent() {
        assert_eq!(TABLE.iter().map(|r| r.0).collect::<Vec<_>>(), Status::ALL);
        for &(s, v, n) in TABLE {
            assert_eq!((to_c(s), from_c(v), name(v).unwrap().to_str().unwrap()), (v, Some(s), n));
            assert_eq!(s as u32, v, "{n}");
        }
        assert!(TABLE.windows(2).all(|w| w[0].1 < w[1].1), "in value order");
        assert_eq!((from_c(3), name(3)), (None, None));
    }
}
