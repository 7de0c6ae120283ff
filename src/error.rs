//! Status codes and error values.
//!
//! Errors are values (SPEC §2.2): a failed operation poisons what it writes
//! with an [`Error`], and every later reader or updater fails with that same
//! object (shared, never re-worded). Status codes are stable and never reused;
//! the C ABI returns them as `ta_status`.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// A stable status code. The numbers are stable and never reused (a
/// failure's [`Error::code`] defaults to its status's number); the C
/// library's `ta_status` values are these numbers.
#[repr(u32)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// Success.
    Ok = 0,
    /// The operation has not completed yet.
    Pending = 1,
    /// A wait ran out of time before the operation completed.
    Timeout = 2,
    /// A required handle argument was NULL.
    NullHandle = 10,
    /// The handle was valid once but its object has been freed.
    StaleHandle = 11,
    /// The handle was already freed.
    DoubleFree = 12,
    /// The handle refers to an object of another type.
    WrongHandleType = 13,
    /// The value is not a handle this library issued.
    InvalidHandle = 14,
    /// A required pointer argument was NULL.
    NullPointer = 15,
    /// An argument is outside its allowed range.
    InvalidArgument = 20,
    /// Operand dtypes do not fit the operation.
    DtypeMismatch = 21,
    /// Operand shapes do not fit the operation.
    ShapeMismatch = 22,
    /// Operands live in different domains.
    DomainMismatch = 23,
    /// The output is read-only.
    ReadOnly = 24,
    /// An output may overlap another operand of the same operation (the same
    /// tensor, or views of one tensor whose elements may overlap; disjoint
    /// views of one tensor are accepted).
    Alias = 25,
    /// The tensor has no value yet.
    Unconstructed = 26,
    /// The tensor's shape is not known at submission.
    ShapeUnknown = 27,
    /// The operation is not supported for these operands.
    Unsupported = 28,
    /// An index or range is out of bounds.
    OutOfRange = 29,
    /// A caller buffer is too small for the result.
    BufferTooSmall = 30,
    /// The operation needs data dense in memory (for example a reshape).
    NotContiguous = 31,
    /// A user kernel reported failure.
    KernelFailed = 40,
    /// The operation was cancelled before it ran.
    Cancelled = 41,
    /// The runtime is shut down and accepts no work.
    Shutdown = 42,
    /// Blocking here would deadlock (for example, a kernel waiting on its own output).
    WouldDeadlock = 43,
    /// Memory could not be allocated.
    OutOfMemory = 44,
    /// A panic was caught inside the library or a Rust kernel.
    Panic = 45,
    /// Every backend declined the operation.
    NoBackend = 46,
    /// A deferred-completion token was already finished (the runtime
    /// completed its operation as cancelled at shutdown).
    AlreadyFinished = 47,
    /// CUDA is not available (no driver or no device).
    CudaUnavailable = 50,
    /// A CUDA call failed.
    CudaError = 51,
    /// An internal invariant failed; please report it.
    Internal = 99,
}

impl Status {
    /// Every status, in value order.
    ///
    /// ```
    /// assert_eq!(tensorasync::Status::ALL[0], tensorasync::Status::Ok);
    /// ```
    pub const ALL: &'static [Status] = &[
        Status::Ok,
        Status::Pending,
        Status::Timeout,
        Status::NullHandle,
        Status::StaleHandle,
        Status::DoubleFree,
        Status::WrongHandleType,
        Status::InvalidHandle,
        Status::NullPointer,
        Status::InvalidArgument,
        Status::DtypeMismatch,
        Status::ShapeMismatch,
        Status::DomainMismatch,
        Status::ReadOnly,
        Status::Alias,
        Status::Unconstructed,
        Status::ShapeUnknown,
        Status::Unsupported,
        Status::OutOfRange,
        Status::BufferTooSmall,
        Status::NotContiguous,
        Status::KernelFailed,
        Status::Cancelled,
        Status::Shutdown,
        Status::WouldDeadlock,
        Status::OutOfMemory,
        Status::Panic,
        Status::NoBackend,
        Status::AlreadyFinished,
        Status::CudaUnavailable,
        Status::CudaError,
        Status::Internal,
    ];

    /// The status with this numeric value, if any.
    ///
    /// ```
    /// use tensorasync::Status;
    /// assert_eq!(Status::from_u32(22), Some(Status::ShapeMismatch));
    /// assert_eq!(Status::from_u32(3), None);
    /// ```
    pub fn from_u32(v: u32) -> Option<Status> {
        Status::ALL.iter().copied().find(|s| *s as u32 == v)
    }

    /// A one-line description of the status.
    ///
    /// ```
    /// assert_eq!(tensorasync::Status::Ok.description(), "success");
    /// ```
    pub fn description(self) -> &'static str {
        match self {
            Status::Ok => "success",
            Status::Pending => "the operation has not completed yet",
            Status::Timeout => "the wait timed out before the operation completed",
            Status::NullHandle => "a required handle was NULL",
            Status::StaleHandle => "the handle refers to an object that has been freed",
            Status::DoubleFree => "the handle was already freed",
            Status::WrongHandleType => "the handle refers to an object of another type",
            Status::InvalidHandle => "the value is not a handle issued by this library",
            Status::NullPointer => "a required pointer argument was NULL",
            Status::InvalidArgument => "an argument is outside its allowed range",
            Status::DtypeMismatch => "operand dtypes do not fit the operation",
            Status::ShapeMismatch => "operand shapes do not fit the operation",
            Status::DomainMismatch => "operands live in different domains",
            Status::ReadOnly => "the output is read-only",
            Status::Alias => "an output may overlap another operand of the same operation",
            Status::Unconstructed => "the tensor is unconstructed (it has no value yet)",
            Status::ShapeUnknown => "the tensor's shape is not known at submission",
            Status::Unsupported => "the operation is not supported for these operands",
            Status::OutOfRange => "an index or range is out of bounds",
            Status::BufferTooSmall => "a caller-provided buffer is too small",
            Status::NotContiguous => "the data is not dense in memory as the operation needs",
            Status::KernelFailed => "a user kernel reported failure",
            Status::Cancelled => "the operation was cancelled before it ran",
            Status::Shutdown => "the runtime is shut down",
            Status::WouldDeadlock => "blocking here would deadlock",
            Status::OutOfMemory => "memory could not be allocated",
            Status::Panic => "a panic was caught",
            Status::NoBackend => "every backend declined the operation",
            Status::AlreadyFinished => "the operation was already finished (cancelled at shutdown)",
            Status::CudaUnavailable => "CUDA is not available",
            Status::CudaError => "a CUDA call failed",
            Status::Internal => "internal error",
        }
    }
}

/// The variant's name (`KernelFailed`).
impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

struct ErrorInner {
    status: Status,
    code: i64,
    message: String,
    origin: Cow<'static, str>,
}

/// An error object: a status, a message, and the name of the operation where
/// it started. Cloning shares the same object, so a propagated error is the
/// original, not a copy with new words.
#[derive(Clone)]
pub struct Error(Arc<ErrorInner>);

/// The message of a caught panic: `panicked: ` and its text, if it has one.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = payload.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_string()
    }
}

impl Error {
    /// A `Panic` error for a panic caught in `origin` (`payload` is what
    /// `std::panic::catch_unwind` returned).
    ///
    /// ```
    /// let p = std::panic::catch_unwind(|| panic!("boom")).unwrap_err();
    /// let e = tensorasync::Error::from_panic("mine", &*p);
    /// assert_eq!((e.status(), e.message()), (tensorasync::Status::Panic, "panicked: boom"));
    /// ```
    pub fn from_panic(origin: impl Into<Cow<'static, str>>, payload: &(dyn std::any::Any + Send)) -> Error {
        Error::new(Status::Panic, origin, panic_message(payload))
    }

    /// A new error started by the operation `origin`.
    ///
    /// ```
    /// use tensorasync::{Error, Status};
    /// let e = Error::new(Status::InvalidArgument, "mine", "bad input");
    /// assert_eq!((e.status(), e.code()), (Status::InvalidArgument, 20));
    /// ```
    pub fn new(status: Status, origin: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Self::with_code(status, origin, message, status as i64)
    }

    /// A new error that also carries a raw code (for example a user kernel's return value).
    ///
    /// ```
    /// use tensorasync::{Error, Status};
    /// let e = Error::with_code(Status::KernelFailed, "solver", "diverged", -3);
    /// assert_eq!((e.status(), e.code()), (Status::KernelFailed, -3));
    /// ```
    pub fn with_code(
        status: Status,
        origin: impl Into<Cow<'static, str>>,
        message: impl Into<String>,
        code: i64,
    ) -> Self {
        Error(Arc::new(ErrorInner { status, code, message: message.into(), origin: origin.into() }))
    }

    /// The status code.
    ///
    /// ```
    /// use tensorasync::{Error, Status};
    /// assert_eq!(Error::new(Status::Timeout, "w", "late").status(), Status::Timeout);
    /// ```
    pub fn status(&self) -> Status {
        self.0.status
    }
    /// The raw code (the status value unless a kernel returned its own code).
    ///
    /// ```
    /// use tensorasync::{Error, Status};
    /// assert_eq!(Error::new(Status::Timeout, "w", "late").code(), 2);
    /// ```
    pub fn code(&self) -> i64 {
        self.0.code
    }
    /// The detailed message.
    ///
    /// ```
    /// use tensorasync::{Error, Status};
    /// assert_eq!(Error::new(Status::Timeout, "w", "late").message(), "late");
    /// ```
    pub fn message(&self) -> &str {
        &self.0.message
    }
    /// The name of the operation where the error started.
    ///
    /// ```
    /// use tensorasync::{Error, Status};
    /// assert_eq!(Error::new(Status::Timeout, "w", "late").origin(), "w");
    /// ```
    pub fn origin(&self) -> &str {
        &self.0.origin
    }
    /// Whether the origin is one of the library's own operation tags (a
    /// static name), not a name a caller gave (a user kernel's): the C layer
    /// renders the library's tags as the C functions' names.
    ///
    /// ```
    /// use tensorasync::{Error, Status};
    /// assert!(Error::new(Status::Timeout, "fill", "late").origin_is_library());
    /// assert!(!Error::new(Status::Timeout, String::from("user_kernel"), "late").origin_is_library());
    /// ```
    pub fn origin_is_library(&self) -> bool {
        matches!(self.0.origin, Cow::Borrowed(_))
    }
    /// A new error with the same status, code and message, started by `origin`
    /// (for a check that a helper made on an operation's behalf).
    ///
    /// ```
    /// use tensorasync::{Error, Status};
    /// let e = Error::new(Status::OutOfRange, "helper", "index 9").with_origin("caller");
    /// assert_eq!((e.origin(), e.message()), ("caller", "index 9"));
    /// ```
    pub fn with_origin(&self, origin: impl Into<Cow<'static, str>>) -> Error {
        Error::with_code(self.status(), origin, self.message(), self.code())
    }
    /// A new error with the same status, code and origin, and another message
    /// (the origin stays a library tag when it is one).
    ///
    /// ```
    /// use tensorasync::{Error, Status};
    /// let e = Error::new(Status::OutOfRange, "slice", "index 9").with_message("index 9 of 4");
    /// assert_eq!((e.origin(), e.message()), ("slice", "index 9 of 4"));
    /// ```
    pub fn with_message(&self, message: impl Into<String>) -> Error {
        Error(Arc::new(ErrorInner {
            status: self.0.status,
            code: self.0.code,
            message: message.into(),
            origin: self.0.origin.clone(),
        }))
    }
    /// Whether two errors are the same object (propagated rather than re-created).
    ///
    /// ```
    /// use tensorasync::{Error, Status};
    /// let e = Error::new(Status::Internal, "x", "m");
    /// assert!(e.same_as(&e.clone()));
    /// assert!(!e.same_as(&Error::new(Status::Internal, "x", "m")));
    /// ```
    pub fn same_as(&self, other: &Error) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} (in {})", self.status(), self.message(), self.origin())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for Error {}

/// Result with the library's error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
