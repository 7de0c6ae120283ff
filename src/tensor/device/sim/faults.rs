//! Asynchronous failures of simulated commands, and the CUDA error names
//! the simulated device reports.

use std::fmt;

use crate::error::{Error, Status};
use crate::tensor::device::interface::ORIGIN;

pub(super) const ILLEGAL_ADDRESS: &str = "CUDA_ERROR_ILLEGAL_ADDRESS";
pub(super) const MISALIGNED_ADDRESS: &str = "CUDA_ERROR_MISALIGNED_ADDRESS";
pub(super) const OUT_OF_MEMORY: &str = "CUDA_ERROR_OUT_OF_MEMORY";
pub(super) const UNKNOWN: &str = "CUDA_ERROR_UNKNOWN";

/// An asynchronous failure: a CUDA error name and details.
pub(super) struct Fault {
    pub(super) name: &'static str,
    pub(super) detail: String,
}

pub(super) fn fault(name: &'static str, detail: impl Into<String>) -> Fault {
    Fault { name, detail: detail.into() }
}

pub(super) fn cuda_error(name: &str, detail: impl fmt::Display) -> Error {
    Error::new(Status::CudaError, ORIGIN, format!("{name}: {detail}"))
}

pub(super) fn invalid(detail: impl Into<String>) -> Error {
    Error::new(Status::InvalidArgument, ORIGIN, detail.into())
}

pub(super) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_string()
    }
}

pub(super) fn too_large(what: &str) -> Error {
    invalid(format!("{what} is too large for the address space"))
}
