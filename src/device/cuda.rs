//! Real CUDA devices through cudarc (placeholder; being implemented).

use std::sync::Arc;

use super::Device;

/// The CUDA devices of this machine, or why there are none. Never panics.
pub(crate) fn probe() -> std::result::Result<Vec<Arc<dyn Device>>, String> {
    Err("this build has no CUDA support".into())
}
