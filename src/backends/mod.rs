//! Backends: leaf kernels behind the [`crate::dispatch::Backend`] trait.

pub(crate) mod blas;
pub(crate) mod dense;
pub(crate) mod native;

use crate::dispatch::Backend;

/// Host backends in preference order.
pub(crate) static HOST: &[&dyn Backend] = &[&native::Native];
