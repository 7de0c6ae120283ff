//! How a BLAS-style (column-major) gemm call reads strided operands: the
//! transpose flags and leading dimensions, or why BLAS cannot take them.
//! Shared by the system BLAS and cuBLAS, which take the same calls.

use std::ffi::c_int;

use super::mat2::Mat2;

/// How BLAS reads one operand of logical shape `p x q`: its transpose flag
/// and leading dimension, or why it cannot.
fn operand_layout(x: &Mat2<u8>, conj: bool, name: &str) -> Result<(u8, c_int), String> {
    let (p, q) = (x.rows, x.cols);
    if (p > 1 && x.rs < 0) || (q > 1 && x.cs < 0) {
        return Err(format!("{name} has a negative stride"));
    }
    let fits = |ld: isize, min: usize| ld >= min.max(1) as isize && ld <= c_int::MAX as isize;
    // Column-major storage: BLAS reads it as is ('N'), which cannot conjugate.
    if x.rs == 1 || p <= 1 {
        let ld = if q <= 1 { p.max(1) as isize } else { x.cs };
        if fits(ld, p) && !conj {
            return Ok((b'N', ld as c_int));
        }
    }
    // Row-major storage: BLAS reads the transpose ('T', or 'C' to conjugate).
    if x.cs == 1 || q <= 1 {
        let ld = if p <= 1 { q.max(1) as isize } else { x.rs };
        if fits(ld, q) {
            return Ok((if conj { b'C' } else { b'T' }, ld as c_int));
        }
    }
    if conj && (x.rs == 1 || p <= 1) {
        return Err(format!("{name} is conjugated but column-major (BLAS conjugates only transposed operands)"));
    }
    if x.rs != 1 && x.cs != 1 {
        return Err(format!("{name} has no unit stride (strides {}, {})", x.rs, x.cs));
    }
    Err(format!("{name}'s leading dimension is too small or too large (strides {}, {})", x.rs, x.cs))
}

/// The call BLAS will make: `(transa, transb, m, n, k, A, lda, B, ldb, ldc)`
/// in BLAS's own (column-major) terms, with `swap` telling that BLAS's A and
/// B are our `B^T` and `A^T` (C row-major).
pub(crate) struct Plan {
    pub(crate) ta: u8,
    pub(crate) tb: u8,
    pub(crate) lda: c_int,
    pub(crate) ldb: c_int,
    pub(crate) ldc: c_int,
    pub(crate) swap: bool,
}

/// Plan `C = op(A)·op(B)`, trying C column-major, then C row-major.
pub(crate) fn plan(c: &Mat2<u8>, a: &Mat2<u8>, b: &Mat2<u8>) -> Result<Plan, String> {
    let (m, n) = (c.rows, c.cols);
    let mut why = Vec::new();
    // C column-major: C = op(A) op(B).
    if (c.rs == 1 || m <= 1) && !(n > 1 && c.cs < 0) {
        let ldc = if n <= 1 { m.max(1) as isize } else { c.cs };
        if ldc >= m.max(1) as isize && ldc <= c_int::MAX as isize {
            match (operand_layout(a, a.conj, "A"), operand_layout(b, b.conj, "B")) {
                (Ok((ta, lda)), Ok((tb, ldb))) => return Ok(Plan { ta, tb, lda, ldb, ldc: ldc as c_int, swap: false }),
                (Err(e), _) | (_, Err(e)) => why.push(e),
            }
        } else {
            why.push(format!("C's leading dimension {ldc} is too small"));
        }
    }
    // C row-major: C^T = op(B^T) op(A^T), C^T column-major.
    if (c.cs == 1 || n <= 1) && !(m > 1 && c.rs < 0) {
        let ldc = if m <= 1 { n.max(1) as isize } else { c.rs };
        if ldc >= n.max(1) as isize && ldc <= c_int::MAX as isize {
            let bt = Mat2 { rows: b.cols, cols: b.rows, rs: b.cs, cs: b.rs, ..*b };
            let at = Mat2 { rows: a.cols, cols: a.rows, rs: a.cs, cs: a.rs, ..*a };
            match (operand_layout(&bt, b.conj, "B"), operand_layout(&at, a.conj, "A")) {
                (Ok((ta, lda)), Ok((tb, ldb))) => return Ok(Plan { ta, tb, lda, ldb, ldc: ldc as c_int, swap: true }),
                (Err(e), _) | (_, Err(e)) => why.push(e),
            }
        } else {
            why.push(format!("C's leading dimension {ldc} is too small"));
        }
    }
    if why.is_empty() {
        why.push(format!("C has no unit stride or a negative one (strides {}, {})", c.rs, c.cs));
    }
    why.dedup();
    Err(why.join("; "))
}
