//! Layer 3, tensors: values, views, handles, block arrays, owner
//! tokens and devices. Nothing here schedules work: the layer imports only
//! the vocabulary and the epoch queues below it.

pub mod blocks;
pub(crate) mod coalesced;
pub(crate) mod counted;
pub mod device;
pub(crate) mod handle;
pub mod storage;
pub mod value;
pub mod view;
