//! Operation names: the origin recorded in every error an operation starts.

use std::borrow::Cow;
use std::sync::Arc;

/// The name of a submitted operation. Library operations use static names;
/// user kernels may give their own. A borrowed name costs nothing per
/// submission: it is copied only if an error is created.
///
/// ```
/// use tensorasync::{ops, KernelFailure, KernelFn, Mode, Order, Submit, Tensor};
/// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
/// let k = KernelFn::new(|_| Err(KernelFailure { code: 1, message: None }));
/// // A name made at run time names the operation's errors.
/// let name = format!("solver_step_{}", 7);
/// let ev = ops::kernel(name, &[(&t, Mode::Update)], k, Submit::default()).unwrap();
/// assert_eq!(ev.wait(None).unwrap_err().origin(), "solver_step_7");
/// ```
#[derive(Clone, Debug)]
pub struct OpName(Repr);

// Private: a borrowed name is made only through the unsafe `borrowed`.
#[derive(Clone, Debug)]
enum Repr {
    Static(&'static str),
    Shared(Arc<str>),
    /// Bytes the submitter keeps valid until the operation completes.
    Borrowed {
        ptr: *const u8,
        len: usize,
    },
}

// SAFETY: a Borrowed name is only read while its operation is pending or
// running, which the submitter guarantees it outlives (see `borrowed`).
unsafe impl Send for OpName {}

impl OpName {
    /// A name in foreign memory (a C caller's string), borrowed rather than
    /// copied at each submission; Rust callers name operations with a
    /// `&'static str` or a `String`.
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay valid, unmodified UTF-8 (invalid bytes are
    /// replaced when read) until the operation completes.
    ///
    /// ```
    /// use tensorasync::ops::OpName;
    /// let name = String::from("from_c");
    /// // SAFETY: `name` is valid UTF-8 and outlives every use of the OpName.
    /// let n = unsafe { OpName::borrowed(name.as_ptr(), name.len()) };
    /// assert_eq!(n.to_origin(), "from_c");
    /// ```
    pub unsafe fn borrowed(ptr: *const u8, len: usize) -> OpName {
        OpName(Repr::Borrowed { ptr, len })
    }

    /// The name, copied out where it is borrowed (used when creating errors).
    ///
    /// ```
    /// use tensorasync::ops::OpName;
    /// assert_eq!(OpName::from("gemm").to_origin(), "gemm");
    /// assert_eq!(OpName::from(String::from("mine")).to_origin(), "mine");
    /// ```
    pub fn to_origin(&self) -> Cow<'static, str> {
        match &self.0 {
            Repr::Static(s) => Cow::Borrowed(s),
            Repr::Shared(s) => Cow::Owned(s.to_string()),
            Repr::Borrowed { ptr, len } => {
                // SAFETY: valid until completion by the contract of `borrowed`,
                // and errors are created before completion.
                let bytes = unsafe { std::slice::from_raw_parts(*ptr, *len) };
                Cow::Owned(String::from_utf8_lossy(bytes).into_owned())
            }
        }
    }
}

impl From<&'static str> for OpName {
    fn from(s: &'static str) -> Self {
        OpName(Repr::Static(s))
    }
}

impl From<String> for OpName {
    fn from(s: String) -> Self {
        OpName(Repr::Shared(s.into()))
    }
}

impl From<Cow<'static, str>> for OpName {
    fn from(s: Cow<'static, str>) -> Self {
        match s {
            Cow::Borrowed(s) => OpName(Repr::Static(s)),
            Cow::Owned(s) => OpName(Repr::Shared(s.into())),
        }
    }
}
