//! Coalesced views (SPEC §2.4): several blocks of a block array as one
//! strided tensor, ordered on every covered block's queue.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::dtype::DType;
use crate::layout::Layout;
use crate::tensor::storage::Storage;
use crate::tensor::value::ValueRc;

/// A coalesced view: several blocks as one strided tensor.
#[derive(Clone)]
pub(crate) struct Coalesced {
    /// The block array's shared allocation (the blocks' storages are parts of it).
    pub(crate) storage: Arc<Storage>,
    pub(crate) dtype: DType,
    /// The covered blocks' hazard records (each enrolled over its whole block).
    pub(crate) members: SmallVec<[ValueRc; 4]>,
    /// Where the elements are in the shared storage (absolute offset).
    pub(crate) layout: Layout,
    /// Reads conjugate (complex dtypes only), as for a view.
    pub(crate) conj: bool,
    /// Writes are rejected (a conjugate).
    pub(crate) read_only: bool,
}

impl Coalesced {
    /// A view over `members`, blocks of the array whose allocation is
    /// `storage`, its elements where `layout` says; read-write, not conjugated.
    pub(crate) fn new(
        storage: Arc<Storage>,
        dtype: DType,
        members: SmallVec<[ValueRc; 4]>,
        layout: Layout,
    ) -> Coalesced {
        Coalesced { storage, dtype, members, layout, conj: false, read_only: false }
    }

    /// The same blocks with another layout (a slice, permutation or reshape).
    pub(crate) fn with_layout(&self, layout: Layout) -> Coalesced {
        Coalesced { storage: self.storage.clone(), members: self.members.clone(), layout, ..*self }
    }

    /// The conjugate: lazy for complex dtypes, the identity for real ones;
    /// read-only either way (as [`crate::tensor::view::View`]'s).
    pub(crate) fn conjugate(&self) -> Coalesced {
        Coalesced { conj: self.dtype.is_complex() && !self.conj, read_only: true, ..self.clone() }
    }

    pub(crate) fn data(&self) -> *mut u8 {
        // SAFETY: the layout lies inside the shared storage, which `storage` keeps alive.
        unsafe { self.storage.ptr().offset(self.layout.offset * self.dtype.size() as isize) }
    }
}
