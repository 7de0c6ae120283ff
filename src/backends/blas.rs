//! An optional system BLAS, found at run time (SPEC §2.5): the library is
//! opened with `dlopen`, so tensorasync neither links against nor requires one.
//!
//! Where it is looked for: the path in the environment variable `TA_BLAS_LIB`
//! (only that one; `none`, `off` or `0` disable BLAS), else the standard names
//! `libopenblas.so.0`, `libblas.so.3`, `libopenblas.so`, in that order. The
//! first library that opens and has at least one of the Fortran symbols
//! `sgemm_`, `dgemm_`, `cgemm_`, `zgemm_` (LP64: 32-bit integers) is used. The
//! search runs once per process, on first use, and never panics; a failure is
//! remembered as the reason every BLAS call then declines.
//!
//! Threads: tasks run concurrently on the runtime's workers, and each BLAS call
//! is one task's kernel. If every call also spawned its own BLAS threads, two
//! concurrent GEMMs on two workers would run 2 x nproc threads on nproc cores.
//! So when the library has `openblas_set_num_threads` (OpenBLAS) or
//! `bli_thread_set_num_threads` (BLIS), it is set to 1 thread at load: the
//! runtime provides the parallelism across tasks. This setting is process-wide
//! for that library. OpenBLAS (0.3.7 and later) is safe to call from several
//! threads at once in this single-threaded mode. (OpenBLAS's pthread build
//! starts its own pool when loaded; with 1 thread set those threads sleep.)
//!
//! BLAS is column-major. Row-major operands are handled by the transpose
//! identity `C^T = B^T A^T`; transposed views become `'T'`, conjugated
//! transposed views `'C'`. A layout BLAS cannot take is *declined* (before
//! anything is written), so the dispatcher's walk goes on to the next backend:
//! no stride of 1 in an operand, a negative stride, a leading dimension too
//! small, a conj flag on an operand that BLAS would have to read
//! untransposed, an extent beyond 32-bit integers, or a non-float dtype.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

use super::dense::{gemm_check, with_float, Mat2, Operand};
use crate::dtype::Element;
use crate::dtype::Scalar;
use crate::error::Error;

/// The environment variable naming the BLAS library to open.
pub(crate) const ENV_VAR: &str = "TA_BLAS_LIB";

/// Libraries tried, in order, when `TA_BLAS_LIB` is not set.
pub(crate) const DEFAULT_CANDIDATES: &[&str] = &["libopenblas.so.0", "libblas.so.3", "libopenblas.so"];

/// Fortran `?gemm_` (with the two hidden string lengths gfortran passes; C
/// implementations such as OpenBLAS ignore them).
pub(crate) type GemmFn = unsafe extern "C" fn(
    transa: *const c_char,
    transb: *const c_char,
    m: *const c_int,
    n: *const c_int,
    k: *const c_int,
    alpha: *const c_void,
    a: *const c_void,
    lda: *const c_int,
    b: *const c_void,
    ldb: *const c_int,
    beta: *const c_void,
    c: *mut c_void,
    ldc: *const c_int,
    len_transa: usize,
    len_transb: usize,
);
type SetThreadsFn = unsafe extern "C" fn(c_int);
type GetConfigFn = unsafe extern "C" fn() -> *const c_char;
type GetThreadsFn = unsafe extern "C" fn() -> c_int;

/// A loaded BLAS. The library is never closed (its symbols live for the
/// process).
pub(crate) struct Blas {
    /// The name or path it was opened by.
    pub(crate) path: String,
    /// `openblas_get_config()` where available.
    pub(crate) config: Option<String>,
    /// `sgemm_`, `dgemm_`, `cgemm_`, `zgemm_` (f32, f64, c64, c128).
    pub(crate) gemm: [Option<GemmFn>; 4],
    set_threads: Option<SetThreadsFn>,
    get_threads: Option<GetThreadsFn>,
}

impl Blas {
    /// Set the library's own thread count (OpenBLAS/BLIS); false if it has no
    /// such control. The library sets 1 at load (see the module docs); only a
    /// measurement should change it.
    pub(crate) fn set_num_threads(&self, n: usize) -> bool {
        match self.set_threads {
            Some(f) => {
                // SAFETY: the symbol has this C signature in OpenBLAS and BLIS.
                unsafe { f(n.min(c_int::MAX as usize) as c_int) };
                true
            }
            None => false,
        }
    }

    /// The library's own thread count, where it tells (OpenBLAS).
    pub(crate) fn num_threads(&self) -> Option<usize> {
        // SAFETY: `openblas_get_num_threads` takes nothing and returns an int.
        self.get_threads.map(|f| unsafe { f() }.max(0) as usize)
    }

    /// One line describing the library.
    pub(crate) fn describe(&self) -> String {
        let threads = match self.num_threads() {
            Some(n) => format!(", {n} thread(s) per call"),
            None => String::new(),
        };
        match &self.config {
            Some(c) => format!("{} ({c}){threads}", self.path),
            None => format!("{}{threads}", self.path),
        }
    }
}

fn dlerror_string() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the
    // next dl* call on this thread.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown dlopen error".to_string()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

/// Look up `name` in `handle`.
///
/// # Safety
/// `handle` is a live dlopen handle.
unsafe fn sym(handle: *mut c_void, name: &CStr) -> *mut c_void {
    unsafe { libc::dlsym(handle, name.as_ptr()) }
}

/// Open the first usable library of `candidates`. Never panics; the error
/// lists why each candidate failed.
pub(crate) fn load_from(candidates: &[&str]) -> Result<Blas, String> {
    if candidates.is_empty() {
        return Err("no candidate library to try".to_string());
    }
    let mut reasons = Vec::new();
    for &path in candidates {
        let Ok(cpath) = CString::new(path) else {
            reasons.push(format!("{path:?}: contains a NUL byte"));
            continue;
        };
        // SAFETY: dlopen with a valid C string; the handle is never closed
        // once its symbols are in use.
        let handle = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            reasons.push(format!("{path}: {}", dlerror_string()));
            continue;
        }
        // SAFETY: a live handle; each symbol, if present, has the standard
        // Fortran BLAS (or OpenBLAS/BLIS extension) signature.
        let (gemm, set_threads, get_threads, config) = unsafe {
            let g = |n: &CStr| {
                let p = sym(handle, n);
                (!p.is_null()).then(|| std::mem::transmute::<*mut c_void, GemmFn>(p))
            };
            let gemm = [g(c"sgemm_"), g(c"dgemm_"), g(c"cgemm_"), g(c"zgemm_")];
            let mut st = sym(handle, c"openblas_set_num_threads");
            if st.is_null() {
                st = sym(handle, c"bli_thread_set_num_threads");
            }
            let set_threads = (!st.is_null()).then(|| std::mem::transmute::<*mut c_void, SetThreadsFn>(st));
            let gt = sym(handle, c"openblas_get_num_threads");
            let get_threads = (!gt.is_null()).then(|| std::mem::transmute::<*mut c_void, GetThreadsFn>(gt));
            let gc = sym(handle, c"openblas_get_config");
            let config = (!gc.is_null()).then(|| {
                let f = std::mem::transmute::<*mut c_void, GetConfigFn>(gc);
                let s = f();
                if s.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(s).to_string_lossy().trim().to_string()
                }
            });
            (gemm, set_threads, get_threads, config.filter(|c| !c.is_empty()))
        };
        if gemm.iter().all(Option::is_none) {
            reasons.push(format!("{path}: no sgemm_/dgemm_/cgemm_/zgemm_ symbol"));
            // SAFETY: nothing from this handle is in use.
            unsafe { libc::dlclose(handle) };
            continue;
        }
        let blas = Blas { path: path.to_string(), config, gemm, set_threads, get_threads };
        // One BLAS thread per call: the runtime's workers are the parallelism.
        blas.set_num_threads(1);
        return Ok(blas);
    }
    Err(reasons.join("; "))
}

/// The candidates for this process: `TA_BLAS_LIB` alone if set (empty list if
/// it says `none`, `off` or `0`), else [`DEFAULT_CANDIDATES`].
pub(crate) fn candidates() -> Vec<String> {
    match std::env::var_os(ENV_VAR) {
        Some(v) if !v.is_empty() => {
            let v = v.to_string_lossy().into_owned();
            if matches!(v.as_str(), "none" | "off" | "0") {
                Vec::new()
            } else {
                vec![v]
            }
        }
        _ => DEFAULT_CANDIDATES.iter().map(|s| s.to_string()).collect(),
    }
}

static LOADED: OnceLock<Result<Blas, String>> = OnceLock::new();

/// The process's BLAS, loaded on first use, or why there is none.
pub(crate) fn blas() -> Result<&'static Blas, &'static str> {
    let r = LOADED.get_or_init(|| {
        let c = candidates();
        if c.is_empty() {
            return Err(format!("disabled by {ENV_VAR}"));
        }
        let refs: Vec<&str> = c.iter().map(String::as_str).collect();
        load_from(&refs)
    });
    match r {
        Ok(b) => Ok(b),
        Err(e) => Err(e.as_str()),
    }
}

/// Which library was loaded (name, and OpenBLAS's configuration line), or
/// `None` when no BLAS is available.
pub fn blas_info() -> Option<String> {
    blas().ok().map(Blas::describe)
}

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
/// Also used for cuBLAS, which takes the same calls.
pub(crate) struct Plan {
    pub(crate) ta: u8,
    pub(crate) tb: u8,
    pub(crate) lda: c_int,
    pub(crate) ldb: c_int,
    pub(crate) ldc: c_int,
    pub(crate) swap: bool,
}

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

/// `C = alpha·op(A)·op(B) [+ beta·C]` through the process's BLAS, with the
/// semantics of [`super::dense::gemm`]. `Err(reason)`: declined, nothing was
/// written. `Ok(result)`: it ran (`Ok(Err(e))` for a shape or dtype error,
/// the same errors the native kernel reports).
///
/// # Safety
/// As for [`super::dense::gemm`].
pub(crate) unsafe fn gemm_blas(
    c: &Operand<'_>,
    alpha: Scalar,
    a: &Operand<'_>,
    b: &Operand<'_>,
    beta: Option<Scalar>,
) -> Result<Result<(), Error>, String> {
    let lib = blas().map_err(|e| format!("no system BLAS ({e})"))?;
    unsafe { gemm_blas_with(lib, c, alpha, a, b, beta) }
}

/// [`gemm_blas`] with an explicit library.
///
/// # Safety
/// As for [`super::dense::gemm`].
pub(crate) unsafe fn gemm_blas_with(
    lib: &Blas,
    c: &Operand<'_>,
    alpha: Scalar,
    a: &Operand<'_>,
    b: &Operand<'_>,
    beta: Option<Scalar>,
) -> Result<Result<(), Error>, String> {
    let idx = match c.dtype {
        crate::dtype::DType::F32 => 0,
        crate::dtype::DType::F64 => 1,
        crate::dtype::DType::C64 => 2,
        crate::dtype::DType::C128 => 3,
        d => return Err(format!("BLAS has no {} gemm", d.name())),
    };
    if let Err(e) = gemm_check("gemm", c, a, b) {
        return Ok(Err(e));
    }
    let Some(f) = lib.gemm[idx] else {
        return Err(format!("{} has no {}gemm_", lib.path, ["s", "d", "c", "z"][idx]));
    };
    let (cm, am, bm) = (Mat2::<u8>::from_operand(c), Mat2::<u8>::from_operand(a), Mat2::<u8>::from_operand(b));
    let (m, n, k) = (cm.rows, cm.cols, am.cols);
    if m == 0 || n == 0 {
        return Ok(Ok(()));
    }
    if [m, n, k].iter().any(|&d| d > c_int::MAX as usize) {
        return Err(format!("extents {m}x{n}x{k} exceed BLAS's 32-bit integers"));
    }
    let p = plan(&cm, &am, &bm)?;
    let (bm_, bn, pa, pb) = if p.swap { (n, m, bm.ptr, am.ptr) } else { (m, n, am.ptr, bm.ptr) };
    let (bm_, bn, bk) = (bm_ as c_int, bn as c_int, k as c_int);
    with_float!(c.dtype, T => {
        let alpha: T = T::from_scalar(alpha);
        let beta: T = beta.map(T::from_scalar).unwrap_or(T::zero());
        let (ta, tb) = (p.ta as c_char, p.tb as c_char);
        // SAFETY: the plan checked every leading dimension against the
        // extents, so BLAS reads and writes exactly the operands' elements,
        // which are valid by the caller's contract; C is exclusively accessed.
        unsafe {
            f(
                &ta, &tb, &bm_, &bn, &bk,
                (&alpha as *const T).cast(), pa as *const c_void, &p.lda,
                pb as *const c_void, &p.ldb,
                (&beta as *const T).cast(), cm.ptr as *mut c_void, &p.ldc,
                1, 1,
            )
        };
        Ok(Ok(()))
    }, unreachable!("dtype checked above"))
}

#[cfg(test)]
mod tests {
    use num_complex::{Complex32, Complex64 as C};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::super::dense::tests::{assert_close, complex, rand_scalar, ref_gemm, sc, Lay, Placed, Tens, TestEl};
    use super::*;
    use crate::dtype::DType;
    use crate::error::Status;

    /// The system BLAS for the "present" tests, or `None` (skipped) where none
    /// is installed. `TA_REQUIRE_BLAS=1` turns a missing BLAS into a failure.
    fn lib() -> Option<Blas> {
        match load_from(DEFAULT_CANDIDATES) {
            Ok(l) => Some(l),
            Err(e) => {
                assert!(std::env::var_os("TA_REQUIRE_BLAS").is_none(), "TA_REQUIRE_BLAS is set but: {e}");
                eprintln!("no system BLAS here, skipping: {e}");
                None
            }
        }
    }

    fn blas_case<T: TestEl>(
        lib: &Blas,
        rng: &mut SmallRng,
        m: usize,
        n: usize,
        k: usize,
        lays: (Lay, Lay, Lay),
        conj: (bool, bool),
    ) {
        let (la, lb, lc) = lays;
        let at = Tens::random::<T>(&[m, k], rng);
        let bt = Tens::random::<T>(&[k, n], rng);
        let alpha = rand_scalar::<T>(rng);
        let beta = match rng.gen_range(0..4) {
            0 => None,
            1 => Some(Scalar::real(0.0)),
            2 => Some(Scalar::real(1.0)),
            _ => Some(rand_scalar::<T>(rng)),
        };
        let reads_c = beta.is_some_and(|b| b != Scalar::real(0.0));
        let ct = if reads_c { Tens::random::<T>(&[m, n], rng) } else { Tens::filled(&[m, n], C::new(f64::NAN, 0.0)) };
        let mut a = Placed::<T>::new(&at, la, rng);
        let mut b = Placed::<T>::new(&bt, lb, rng);
        let mut c = Placed::<T>::new(&ct, lc, rng);
        let what = format!("blas {} {m}x{n}x{k} {lays:?} conj {conj:?} beta {beta:?}", T::DTYPE.name());
        let gaps = c.gaps();
        let r = unsafe { gemm_blas_with(lib, &c.op(false), alpha, &a.op(conj.0), &b.op(conj.1), beta) };
        r.unwrap_or_else(|why| panic!("{what}: declined: {why}")).unwrap();
        let want = ref_gemm(
            sc(alpha),
            &if conj.0 { at.conj() } else { at.clone() },
            &if conj.1 { bt.conj() } else { bt.clone() },
            beta.map(sc),
            &ct,
        );
        assert_close(&c.get(), &want, T::TOL * (k as f64 + 2.0) * 8.0, &what);
        let after = c.gaps();
        assert!(gaps.iter().zip(&after).all(|(x, y)| x.1 == y.1), "{what}: wrote outside C");
    }

    fn blas_all<T: TestEl>(lib: &Blas, seed: u64) {
        let mut rng = SmallRng::seed_from_u64(seed);
        let lays = [Lay::RowMajor, Lay::ColMajor];
        for &(m, n, k) in
            &[(3, 5, 4), (5, 3, 4), (1, 6, 3), (6, 1, 2), (1, 1, 4), (4, 4, 1), (0, 3, 2), (3, 4, 0), (20, 17, 33)]
        {
            for &la in &lays {
                for &lb in &lays {
                    for &lc in &lays {
                        let conj = if complex::<T>() {
                            // BLAS conjugates only operands it reads transposed:
                            // with C column-major, row-major A and B.
                            (la == Lay::RowMajor && rng.gen_bool(0.7), lb == Lay::RowMajor && rng.gen_bool(0.7))
                        } else {
                            (false, false)
                        };
                        let conj = if lc == Lay::ColMajor { conj } else { (false, false) };
                        blas_case::<T>(lib, &mut rng, m, n, k, (la, lb, lc), conj);
                    }
                }
            }
        }
    }

    #[test]
    fn blas_present_all_dtypes() {
        let Some(lib) = lib() else { return };
        assert!(lib.gemm.iter().all(Option::is_some), "{} lacks a gemm symbol", lib.path);
        blas_all::<f32>(&lib, 1);
        blas_all::<f64>(&lib, 2);
        blas_all::<Complex32>(&lib, 3);
        blas_all::<C>(&lib, 4);
        // Loading set BLAS to one thread (the runtime's workers parallelise).
        if let Some(t) = lib.num_threads() {
            assert_eq!(t, 1, "{}", lib.describe());
        }
        // The process-wide loader finds the same library (unless redirected).
        if std::env::var_os(ENV_VAR).is_none() {
            let info = blas_info().expect("a BLAS loads here");
            assert!(info.starts_with(DEFAULT_CANDIDATES[0]) || info.contains("blas"), "{info}");
        }
    }

    /// Concurrent calls from several threads (single-threaded BLAS mode).
    #[test]
    fn blas_concurrent_calls() {
        let Some(lib) = lib() else { return };
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let lib = &lib;
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(40 + t);
                    for _ in 0..5 {
                        blas_case::<f64>(
                            lib,
                            &mut rng,
                            40,
                            50,
                            60,
                            (Lay::RowMajor, Lay::ColMajor, Lay::ColMajor),
                            (false, false),
                        );
                        blas_case::<C>(
                            lib,
                            &mut rng,
                            30,
                            20,
                            25,
                            (Lay::RowMajor, Lay::RowMajor, Lay::ColMajor),
                            (true, false),
                        );
                    }
                });
            }
        });
    }

    /// Padded leading dimensions and transposed/adjoint views, and a
    /// conjugated column-major A accepted through the row-major mapping.
    #[test]
    fn blas_padded_and_views() {
        let Some(lib) = lib() else { return };
        let mut rng = SmallRng::seed_from_u64(5);
        let at = Tens::random::<C>(&[4, 3], &mut rng);
        let bt = Tens::random::<C>(&[3, 5], &mut rng);
        // A column-major with ld 6, conjugated; C row-major with ld 7.
        let mut a = Placed::<C>::with_strides(&at, &[1, 6], C::new(0.0, 0.0));
        let mut b = Placed::<C>::with_strides(&bt, &[1, 3], C::new(0.0, 0.0));
        let mut c = Placed::<C>::with_strides(&Tens::filled(&[4, 5], C::new(f64::NAN, 0.0)), &[7, 1], C::new(0.0, 0.0));
        let r = unsafe { gemm_blas_with(&lib, &c.op(false), Scalar::real(1.0), &a.op(true), &b.op(false), None) };
        r.expect("accepted").unwrap();
        let want = ref_gemm(C::new(1.0, 0.0), &at.conj(), &bt, None, &at);
        assert_close(&c.get(), &want, 1e-13, "conj col-major A, row-major C");
    }

    #[test]
    fn blas_declines_layouts_it_cannot_take() {
        let Some(lib) = lib() else { return };
        let mut rng = SmallRng::seed_from_u64(6);
        let at = Tens::random::<C>(&[4, 3], &mut rng);
        let bt = Tens::random::<C>(&[3, 5], &mut rng);
        let ct = Tens::random::<C>(&[4, 5], &mut rng);
        let mut c = Placed::<C>::new(&ct, Lay::ColMajor, &mut rng);
        let before = c.get();
        let mut b = Placed::<C>::new(&bt, Lay::ColMajor, &mut rng);
        let cases: Vec<(Vec<isize>, bool, &str)> = vec![
            (vec![-1, 4], false, "negative"),
            (vec![2, 8], false, "unit stride"),
            (vec![1, 4], true, "conjugated"),
            (vec![1, 2], false, "leading dimension"),
        ];
        for (strides, conj, reason) in cases {
            let mut a = Placed::<C>::with_strides(&at, &strides, C::new(0.0, 0.0));
            let r = unsafe {
                gemm_blas_with(
                    &lib,
                    &c.op(false),
                    Scalar::real(1.0),
                    &a.op(conj),
                    &b.op(false),
                    Some(Scalar::real(1.0)),
                )
            };
            match r {
                Err(why) => assert!(why.contains(reason), "strides {strides:?}: {why}"),
                Ok(_) => panic!("strides {strides:?} conj {conj}: accepted"),
            }
            assert_close(&c.get(), &before, 0.0, "declined calls write nothing");
        }
        // Overlapping C is an error for every backend, not a decline.
        let ext = [4usize, 5];
        let st = [0isize, 1];
        let mut a = Placed::<C>::new(&at, Lay::ColMajor, &mut rng);
        let cop = Operand { extents: &ext, strides: &st, ..c.op(false) };
        let r = unsafe { gemm_blas_with(&lib, &cop, Scalar::real(1.0), &a.op(false), &b.op(false), None) };
        assert_eq!(r.expect("ran").unwrap_err().status(), Status::InvalidArgument);
        // Shape errors name the shapes.
        let mut b2 = Placed::<C>::new(&Tens::random::<C>(&[5, 2], &mut rng), Lay::ColMajor, &mut rng);
        let mut c2 = Placed::<C>::new(&Tens::random::<C>(&[4, 2], &mut rng), Lay::ColMajor, &mut rng);
        let e = unsafe { gemm_blas_with(&lib, &c2.op(false), Scalar::real(1.0), &a.op(false), &b2.op(false), None) }
            .expect("ran")
            .unwrap_err();
        assert!(e.message().contains("A is 4x3") && e.message().contains("B is 5x2"), "{}", e.message());
        // Integer dtypes: declined.
        let mut iv = vec![0i32; 4];
        let e2 = [2usize, 2];
        let s2 = [2isize, 1];
        let iop =
            Operand { ptr: iv.as_mut_ptr() as *mut u8, dtype: DType::I32, extents: &e2, strides: &s2, conj: false };
        assert!(unsafe { gemm_blas_with(&lib, &iop, Scalar::real(1.0), &iop, &iop, None) }.is_err());
    }

    #[test]
    fn blas_absent_declines() {
        let e = load_from(&[]).err().expect("no candidates");
        assert!(!e.is_empty());
        let e = load_from(&["/nonexistent/libta-no-blas.so"]).err().expect("missing file");
        assert!(e.contains("/nonexistent/libta-no-blas.so"), "{e}");
        // A library without gemm symbols is skipped with a reason.
        let e = load_from(&["libc.so.6"]).err().expect("libc has no dgemm_");
        assert!(e.contains("no sgemm_"), "{e}");
    }

    /// Runs this test binary again with `TA_BLAS_LIB` pointing at a missing
    /// file: the process-wide loader then has no BLAS, and gemm declines with
    /// the reason (see `child_without_blas`).
    #[test]
    fn blas_absent_in_subprocess() {
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args(["--exact", "backends::blas::tests::child_without_blas", "--nocapture", "--test-threads=1"])
            .env(ENV_VAR, "/nonexistent/libta-no-blas.so")
            .env("TA_BLAS_TEST_CHILD", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("1 passed") && text.contains("child: declined"), "{text}");
    }

    #[test]
    fn child_without_blas() {
        if std::env::var_os("TA_BLAS_TEST_CHILD").is_none() {
            return; // only meaningful in the subprocess above
        }
        assert!(blas_info().is_none());
        let mut rng = SmallRng::seed_from_u64(7);
        let mut a = Placed::<f64>::new(&Tens::random::<f64>(&[2, 2], &mut rng), Lay::RowMajor, &mut rng);
        let mut b = Placed::<f64>::new(&Tens::random::<f64>(&[2, 2], &mut rng), Lay::RowMajor, &mut rng);
        let ct = Tens::random::<f64>(&[2, 2], &mut rng);
        let mut c = Placed::<f64>::new(&ct, Lay::RowMajor, &mut rng);
        let r = unsafe { gemm_blas(&c.op(false), Scalar::real(1.0), &a.op(false), &b.op(false), None) };
        let Err(why) = r else { panic!("accepted without a BLAS") };
        assert!(why.contains("/nonexistent/libta-no-blas.so"), "{why}");
        assert_close(&c.get(), &ct, 0.0, "untouched");
        println!("child: declined: {why}");
    }
}
