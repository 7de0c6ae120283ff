//! Numeric helpers: tensors from and to logical values (as Complex64, any
//! float dtype), naive references and tolerances.

use num_complex::{Complex32, Complex64};
use rand::rngs::SmallRng;
use rand::Rng;
use tensorasync::*;

use super::LONG;

/// A tiny complex-capable number for references: values as Complex64.
pub type C = Complex64;

/// A tensor of `dtype` with the given logical values (row-major order of
/// `extents`), stored in `order`.
pub fn make(dtype: DType, extents: &[usize], order: Order, vals: &[C]) -> Tensor {
    let src = Layout::contiguous(extents, Order::RowMajor);
    macro_rules! build {
        ($v:expr) => {{
            let data: Vec<_> = $v;
            unsafe { Tensor::from_host(dtype, &src, data.as_ptr().cast(), order) }.unwrap()
        }};
    }
    match dtype {
        DType::F32 => build!(vals.iter().map(|z| z.re as f32).collect()),
        DType::F64 => build!(vals.iter().map(|z| z.re).collect()),
        DType::C64 => build!(vals.iter().map(|z| Complex32::new(z.re as f32, z.im as f32)).collect()),
        DType::C128 => build!(vals.to_vec()),
        _ => unreachable!(),
    }
}

/// Read a tensor's logical values (row-major) as Complex64.
pub fn read(t: &Tensor) -> Vec<C> {
    let n: usize = t.extents().unwrap().iter().product();
    let opts = Submit::default;
    macro_rules! get {
        ($T:ty, $conv:expr) => {{
            let mut out = vec![<$T>::default(); n];
            unsafe { ops::copy_out(t, out.as_mut_ptr().cast(), n, None, opts()) }.unwrap().wait(LONG).unwrap();
            out.into_iter().map($conv).collect()
        }};
    }
    match t.dtype() {
        DType::F32 => get!(f32, |x: f32| C::new(x as f64, 0.0)),
        DType::F64 => get!(f64, |x: f64| C::new(x, 0.0)),
        DType::C64 => get!(Complex32, |z: Complex32| C::new(z.re as f64, z.im as f64)),
        DType::C128 => get!(Complex64, |z| z),
        _ => unreachable!(),
    }
}

pub fn random(rng: &mut SmallRng, n: usize, complex: bool) -> Vec<C> {
    (0..n).map(|_| C::new(rng.gen_range(-1.0..1.0), if complex { rng.gen_range(-1.0..1.0) } else { 0.0 })).collect()
}

pub fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 | DType::C64 => 1e-4,
        _ => 1e-11,
    }
}

pub fn assert_close(got: &[C], want: &[C], dtype: DType, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().map(|z| z.norm()).fold(1.0, f64::max);
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).norm() <= tol(dtype) * scale, "{what}: element {k} is {g}, want {w}");
    }
}

/// Naive matrix product of logical row-major matrices.
pub fn matmul(a: &[C], b: &[C], m: usize, k: usize, n: usize) -> Vec<C> {
    let mut c = vec![C::new(0.0, 0.0); m * n];
    for i in 0..m {
        for j in 0..n {
            for p in 0..k {
                c[i * n + j] += a[i * k + p] * b[p * n + j];
            }
        }
    }
    c
}

pub fn transpose(a: &[C], rows: usize, cols: usize) -> Vec<C> {
    (0..cols).flat_map(|j| (0..rows).map(move |i| a[i * cols + j])).collect()
}

pub const DTYPES: [DType; 4] = [DType::F32, DType::F64, DType::C64, DType::C128];
