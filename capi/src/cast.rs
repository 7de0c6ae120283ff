//! Which Rust object each C handle type names (as rustls-ffi's `Castable`):
//! the handle functions of the crate root are generic over [`Castable`], so
//! passing a handle of one type where another is expected, or storing an
//! object under the wrong handle type, does not compile.

use std::sync::Arc;

use crate::handles::{Borrows, Kind, Object};
use crate::types::*;

/// A `ta_*` handle type: the object behind it, and how the handle table
/// stores it. Every handle owns a shared reference to its object (the
/// objects are reference-counted handles themselves), released by the
/// type's `_free` function ([`Castable::FREE`]).
pub(crate) trait Castable {
    /// The Rust object a handle of this type refers to.
    type RustType;
    /// The kind the table records for it.
    const KIND: Kind;
    /// The function that frees a handle of this type (the origin of its errors).
    const FREE: &'static str;
    /// The table's object for `v`.
    fn into_object(v: Self::RustType) -> Object;
    /// The object, if `o` is of this type.
    fn from_object(o: &Object) -> Option<&Self::RustType>;
    /// The object, if `o` is of this type, by value.
    fn from_owned(o: Object) -> Option<Self::RustType>;
}

/// The object behind `h` in `b`, a live handle of type `H`; otherwise the
/// status that says why not (see `Borrows::get_with`).
#[inline(always)]
pub(crate) fn borrow_as<H: Castable>(b: &Borrows, h: u64) -> Result<&H::RustType, ta::Status> {
    b.get_with(h, H::KIND, H::from_object)
}

macro_rules! castable {
    ($($cty:ty => $kind:ident($rty:ty), $free:literal;)*) => {$(
        impl Castable for $cty {
            type RustType = $rty;
            const KIND: Kind = Kind::$kind;
            const FREE: &'static str = $free;
            #[inline(always)]
            fn into_object(v: $rty) -> Object {
                Object::$kind(v)
            }
            #[inline(always)]
            fn from_object(o: &Object) -> Option<&$rty> {
                match o {
                    Object::$kind(x) => Some(x),
                    _ => None,
                }
            }
            #[inline(always)]
            fn from_owned(o: Object) -> Option<$rty> {
                match o {
                    Object::$kind(x) => Some(x),
                    _ => None,
                }
            }
        }
    )*};
}

castable! {
    ta_runtime => Runtime(ta::Runtime), "ta_runtime_free";
    ta_tensor => Tensor(ta::Tensor), "ta_tensor_free";
    ta_event => Event(ta::Event), "ta_event_free";
    ta_cq => Cq(ta::CompletionQueue), "ta_cq_free";
    ta_error => Error(ta::Error), "ta_error_free";
    ta_blocks => Blocks(ta::BlockArray), "ta_blocks_free";
    ta_mapping => Mapping(Arc<ta::HostAccess>), "ta_mapping_free";
    ta_token => Token(Arc<ta::Token>), "ta_token_finish";
}
