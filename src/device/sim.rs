//! Simulated devices (placeholder; being implemented).

use super::{DevPtr, Device, GemmArgs, Marker, Notify, Place, StreamId};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result, Status};

pub(crate) struct SimDevice {
    ordinal: u32,
    streams: u32,
}

impl SimDevice {
    pub(crate) fn new(ordinal: u32, streams: u32) -> SimDevice {
        SimDevice { ordinal, streams }
    }
}

fn todo() -> Error {
    Error::new(Status::Unsupported, "sim", "not implemented")
}

impl Device for SimDevice {
    fn ordinal(&self) -> u32 {
        self.ordinal
    }
    fn describe(&self) -> String {
        format!("simulated device {}", self.ordinal)
    }
    fn streams(&self) -> u32 {
        self.streams
    }
    fn alloc(&self, _bytes: usize) -> Result<DevPtr> {
        Err(todo())
    }
    unsafe fn free(&self, _ptr: DevPtr) {}
    fn alloc_host(&self, _bytes: usize) -> Result<*mut u8> {
        Err(todo())
    }
    unsafe fn free_host(&self, _ptr: *mut u8) {}
    unsafe fn copy_2d(&self, _: StreamId, _: Place, _: usize, _: Place, _: usize, _: usize, _: usize) -> Result<()> {
        Err(todo())
    }
    unsafe fn memset_2d(&self, _: StreamId, _: DevPtr, _: usize, _: u32, _: usize, _: usize, _: usize) -> Result<()> {
        Err(todo())
    }
    unsafe fn scal(&self, _: StreamId, _: DType, _: usize, _: Scalar, _: DevPtr, _: isize) -> Result<()> {
        Err(todo())
    }
    unsafe fn axpy(&self, _: StreamId, _: DType, _: usize, _: Scalar, _: DevPtr, _: isize, _: DevPtr, _: isize) -> Result<()> {
        Err(todo())
    }
    unsafe fn gemm(&self, _: StreamId, _: DType, _: &GemmArgs) -> Result<()> {
        Err(todo())
    }
    fn record(&self, _: StreamId) -> Result<Marker> {
        Err(todo())
    }
    fn wait_marker(&self, _: StreamId, _: &Marker) -> Result<()> {
        Err(todo())
    }
    fn notify(&self, _: StreamId, _: Notify) -> Result<()> {
        Err(todo())
    }
}
