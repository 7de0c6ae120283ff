//! The binding to the system BLAS library, found at run time: `library`
//! finds and loads it, `gemm` calls it. The backend over it is
//! `crate::backends::blas`.

pub(crate) mod gemm;
pub(crate) mod lent;
pub(crate) mod library;

#[cfg(test)]
mod tests;
