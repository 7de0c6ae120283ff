//! A typed 2-d strided matrix, the kernels' view of a 2-d operand.

use super::float::Float;
use super::operand::Operand;

/// A typed 2-d strided matrix.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Mat2<T> {
    pub ptr: *mut T,
    pub rows: usize,
    pub cols: usize,
    pub rs: isize,
    pub cs: isize,
    pub conj: bool,
}

impl<T> Mat2<T> {
    pub(crate) fn from_operand(x: &Operand<'_>) -> Mat2<T> {
        Mat2 {
            ptr: x.ptr as *mut T,
            rows: x.extents[0],
            cols: x.extents[1],
            rs: x.strides[0],
            cs: x.strides[1],
            conj: x.conjugated(),
        }
    }

    /// Give axes of extent 1 a stride that makes the matrix look dense along
    /// its other axis (their stride is never used to address anything).
    pub(crate) fn normalize_trivial(mut self) -> Self {
        if self.rows <= 1 {
            self.rs = if self.cs == 1 { self.cols.max(1) as isize } else { 1 };
        }
        if self.cols <= 1 {
            self.cs = if self.rs == 1 { self.rows.max(1) as isize } else { 1 };
        }
        self
    }

    /// Reverse the row order (pointer to the last row, stride negated).
    pub(crate) fn flip_rows(mut self) -> Self {
        if self.rows > 0 {
            self.ptr = self.ptr.wrapping_offset(self.rs * (self.rows as isize - 1));
        }
        self.rs = -self.rs;
        self
    }

    pub(crate) fn flip_cols(mut self) -> Self {
        if self.cols > 0 {
            self.ptr = self.ptr.wrapping_offset(self.cs * (self.cols as isize - 1));
        }
        self.cs = -self.cs;
        self
    }

    pub(crate) fn transpose(self) -> Self {
        Mat2 { rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs, ..self }
    }
}

/// `C = beta*C` (`None`: `C = 0`, never read), element by element.
///
/// # Safety
/// `c` addresses writable, exclusively accessed elements.
pub(crate) unsafe fn scale_mat<T: Float>(c: Mat2<T>, beta: Option<T>) {
    let c = if c.rs.unsigned_abs() < c.cs.unsigned_abs() { c.transpose() } else { c };
    // Now the column index varies fastest in memory (|cs| <= |rs|).
    for i in 0..c.rows as isize {
        let row = c.ptr.wrapping_offset(i * c.rs);
        for j in 0..c.cols as isize {
            // SAFETY: inside the operand by the caller's contract.
            unsafe {
                let p = row.offset(j * c.cs);
                *p = match beta {
                    Some(b) => b * *p,
                    None => T::zero(),
                };
            }
        }
    }
}
