//! Where a tensor's bytes live. Every descriptor carries one (SPEC §2.7).

use std::fmt;

/// Host memory, or the memory of one CUDA device.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Domain {
    #[default]
    Host,
    /// CUDA device with this ordinal.
    Cuda(u32),
}

impl Domain {
    /// The compact encoding a value stores: -1 for host, N >= 0 for CUDA device N.
    pub(crate) fn to_i32(self) -> i32 {
        match self {
            Domain::Host => -1,
            Domain::Cuda(n) => n as i32,
        }
    }

    /// Decode [`Domain::to_i32`]'s encoding; `None` for values below -1.
    pub(crate) fn from_i32(v: i32) -> Option<Domain> {
        match v {
            -1 => Some(Domain::Host),
            n if n >= 0 => Some(Domain::Cuda(n as u32)),
            _ => None,
        }
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Domain::Host => f.write_str("host"),
            Domain::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}
