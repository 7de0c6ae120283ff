//! The commands a simulated stream runs, and the log of executed ones.

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::dtype::{DType, Scalar};
use crate::tensor::device::interface::{GemmArgs, Notify};

/// One executed command, as [`crate::tensor::device::sim::SimControl::log`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimOp {
    /// The stream it ran on.
    pub stream: u32,
    pub kind: SimOpKind,
    /// Whether it failed (injected failure, illegal address, panic).
    pub failed: bool,
}

/// What a command was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimOpKind {
    Copy,
    Memset,
    Scal,
    Axpy,
    Gemm,
    Record,
    WaitMarker,
    Notify,
}

/// One side of a copy. Addresses travel to stream threads as integers (which
/// are `Send`); they are turned back into pointers only where the memory is
/// accessed, under the contracts of the `unsafe` device methods.
#[derive(Copy, Clone, Debug)]
pub(super) enum Side {
    Host(u64),
    Dev(u64),
}

impl Side {
    pub(super) fn addr(self) -> u64 {
        match self {
            Side::Host(a) | Side::Dev(a) => a,
        }
    }
}

pub(super) enum Cmd {
    Copy { dst: Side, dpitch: usize, src: Side, spitch: usize, width: usize, height: usize },
    Memset { dst: u64, pitch: usize, value: u32, elem: usize, width: usize, height: usize },
    Scal { dtype: DType, n: usize, alpha: Scalar, x: u64, incx: isize },
    Axpy { dtype: DType, n: usize, alpha: Scalar, x: u64, incx: isize, y: u64, incy: isize },
    Gemm { dtype: DType, args: GemmArgs },
    Record(Arc<SimMarker>),
    Wait(Arc<SimMarker>),
    Notify(Notify),
}

impl Cmd {
    pub(super) fn kind(&self) -> SimOpKind {
        match self {
            Cmd::Copy { .. } => SimOpKind::Copy,
            Cmd::Memset { .. } => SimOpKind::Memset,
            Cmd::Scal { .. } => SimOpKind::Scal,
            Cmd::Axpy { .. } => SimOpKind::Axpy,
            Cmd::Gemm { .. } => SimOpKind::Gemm,
            Cmd::Record(_) => SimOpKind::Record,
            Cmd::Wait(_) => SimOpKind::WaitMarker,
            Cmd::Notify(_) => SimOpKind::Notify,
        }
    }
}

/// A marker of a simulated device: reached when its record command runs.
pub(super) struct SimMarker {
    pub(super) device: u64,
    pub(super) reached: Mutex<bool>,
    pub(super) cv: Condvar,
}

impl SimMarker {
    pub(super) fn reach(&self) {
        *self.reached.lock() = true;
        self.cv.notify_all();
    }
    pub(super) fn wait(&self) {
        let mut r = self.reached.lock();
        while !*r {
            self.cv.wait(&mut r);
        }
    }
}
