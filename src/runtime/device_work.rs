//! What the runtime keeps of a device task's work between its issue and its
//! finish (see `task`'s notes on device tasks). Device backends fill it in.

use std::any::Any;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::error::Result;
use crate::tensor::device::{Device, Marker, StreamId};

/// Where a device task's work is queued: its stream and the marker after it.
pub(crate) type Issue = (StreamId, Marker);

/// Work a device backend queued: where, and what the finish still needs.
pub(crate) struct Issued {
    pub(crate) device: Arc<dyn Device>,
    /// The stream the work is on (the last one, if it used several after
    /// joining them).
    pub(crate) stream: StreamId,
    /// Host work to run once the device work is done (for example, unpack a
    /// staging buffer into host memory); its error fails the operation.
    pub(crate) finisher: Option<Finisher>,
    /// What must live until the device work is done (staging buffers, and
    /// storage of temporaries).
    pub(crate) keep: SmallVec<[Box<dyn Any + Send>; 2]>,
}

/// See [`Issued::finisher`].
pub(crate) type Finisher = Box<dyn FnOnce() -> Result<()> + Send>;
