//! Finding and loading the system BLAS library at run time (SPEC §2.5): it is
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
//! Threads: tasks run concurrently on the runtime's workers. If every BLAS
//! call also spawned its own BLAS threads, two concurrent GEMMs on two workers
//! would run 2 x nproc threads on nproc cores. So when the library has
//! `openblas_set_num_threads` (OpenBLAS) or `bli_thread_set_num_threads`
//! (BLIS), it is set to 1 thread at load: the runtime provides the
//! parallelism, across tasks and within a large product, which
//! [`super::gemm`] splits into blocks of C, one single-threaded call per
//! worker, as the native product does, or, where idle workers lend their
//! cores, makes as one call on that many of the library's threads
//! ([`super::lent`]). This setting is process-wide for that library.
//! OpenBLAS (0.3.7 and later) is safe to call from several threads at once
//! in this single-threaded mode, and a call that another thread makes while
//! a lent call runs queues on the same library threads. (OpenBLAS's pthread
//! build starts its own pool when loaded; with 1 thread set those threads
//! sleep.)
//!
//! Kernel: a dynamic OpenBLAS picks its kernel for the CPU when it loads, and
//! one that does not know the CPU falls back to an older kernel (Debian's
//! 0.3.21 runs Prescott, about a fifth of the speed, on AVX-512 Xeons it
//! predates). The kernel's name (`openblas_get_corename`) is compared with
//! the CPU's instruction-set level, and a fallback is named in
//! [`blas_info`] with the `OPENBLAS_CORETYPE` setting that fixes it. The
//! dispatcher puts the system BLAS before the native backend only where it
//! measured faster (large products; mid-size real ones on AMD's AVX-512
//! CPUs, and on AVX2 CPUs those whose right operand it reads transposed:
//! `backends::registry::blas_wins`), and only for a library
//! that is [`Blas::tuned_for_this_cpu`]; elsewhere it runs only where a
//! selector asks for it.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

/// Held while one call runs on several of the library's threads
/// ([`super::lent`]): the thread count is process-wide, so such calls take
/// turns, and the library counts as set to one thread meanwhile.
pub(crate) static MULTI_THREADED_CALL: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

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
/// `openblas_get_config` and `openblas_get_corename`.
type GetStringFn = unsafe extern "C" fn() -> *const c_char;
type GetThreadsFn = unsafe extern "C" fn() -> c_int;

/// A loaded BLAS. The library is never closed (its symbols live for the
/// process).
pub(crate) struct Blas {
    /// The name or path it was opened by.
    pub(crate) path: String,
    /// `openblas_get_config()` where available.
    pub(crate) config: Option<String>,
    /// `openblas_get_corename()`: the kernel OpenBLAS chose at load.
    pub(crate) core: Option<String>,
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

    /// Whether this is an OpenBLAS whose kernel is written for this CPU's
    /// instruction-set level and that runs one thread per call (as set at
    /// load): the library the dispatch policy may put before the native
    /// backend ([`crate::backends::registry`]).
    pub(crate) fn tuned_for_this_cpu(&self) -> bool {
        let level = self.core.as_deref().and_then(kernel_level);
        level.is_some() && level == cpu_level() && (self.num_threads() == Some(1) || MULTI_THREADED_CALL.is_locked())
    }

    /// Why the kernel is a fallback below this CPU's level, if it is one.
    pub(crate) fn fallback(&self) -> Option<String> {
        fallback_note(self.core.as_deref()?, cpu_level()?)
    }

    /// One line describing the library.
    pub(crate) fn describe(&self) -> String {
        let threads = match self.num_threads() {
            Some(n) => format!(", {n} thread(s) per call"),
            None => String::new(),
        };
        let core = match (&self.core, self.fallback()) {
            (Some(k), Some(why)) => format!(", kernel {k}: {why}"),
            (Some(k), None) => format!(", kernel {k}"),
            (None, _) => String::new(),
        };
        match &self.config {
            Some(c) => format!("{} ({c}){core}{threads}", self.path),
            None => format!("{}{core}{threads}", self.path),
        }
    }
}

/// The x86-64 level (4: AVX-512, 3: AVX2 and FMA, 2: neither) an OpenBLAS
/// kernel is written for, from its name; `None` for a name not known here.
pub(crate) fn kernel_level(core: &str) -> Option<u8> {
    match core.to_ascii_lowercase().as_str() {
        "skylakex" | "cooperlake" | "sapphirerapids" => Some(4),
        "haswell" | "zen" | "excavator" => Some(3),
        "katmai" | "coppermine" | "northwood" | "prescott" | "banias" | "atom" | "core2" | "penryn" | "dunnington"
        | "nehalem" | "athlon" | "opteron" | "opteron_sse3" | "barcelona" | "nano" | "sandybridge" | "bobcat"
        | "bulldozer" | "piledriver" | "steamroller" => Some(2),
        _ => None,
    }
}

/// This CPU's x86-64 level (see [`kernel_level`]); `None` off x86-64.
pub(crate) fn cpu_level() -> Option<u8> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx512f") && has!("avx512bw") && has!("avx512dq") && has!("avx512vl") {
            return Some(4);
        }
        if has!("avx2") && has!("fma") {
            return Some(3);
        }
        Some(2)
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// Whether this CPU is AMD's (its vendor string), asked once.
pub(crate) fn cpu_is_amd() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static AMD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *AMD.get_or_init(|| {
            // CPUID leaf 0: the vendor string ("AuthenticAMD"). The intrinsic
            // is safe from Rust 1.87 on and unsafe before (rust-version 1.84).
            // SAFETY: CPUID leaf 0 exists on every x86-64 CPU.
            #[allow(unused_unsafe)]
            let v = unsafe { std::arch::x86_64::__cpuid(0) };
            (v.ebx, v.edx, v.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163)
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The OpenBLAS kernel for a CPU of `level` (on this CPU's vendor and
/// features, for level 4 and 3).
pub(crate) fn kernel_for(level: u8) -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if level >= 4 {
            return if has!("avx512bf16") { "Cooperlake" } else { "SkylakeX" };
        }
        if level == 3 {
            return if cpu_is_amd() { "Zen" } else { "Haswell" };
        }
    }
    let _ = level;
    "Prescott"
}

/// Why `core` is a fallback on a CPU of `cpu` level, or `None` if it is not
/// one (or its name is not known here).
pub(crate) fn fallback_note(core: &str, cpu: u8) -> Option<String> {
    let k = kernel_level(core)?;
    if k >= cpu {
        return None;
    }
    let what = match cpu {
        4 => "AVX-512",
        3 => "AVX2",
        _ => "newer instructions",
    };
    Some(format!(
        "a fallback kernel, slower than this CPU allows (it has {what}): set OPENBLAS_CORETYPE={} before the \
         library loads",
        kernel_for(cpu)
    ))
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

/// The string an OpenBLAS `char *name(void)` function returns (trimmed), or
/// `None` if the library lacks it or it says nothing.
///
/// # Safety
/// `handle` is a live dlopen handle, and `name`, if present, has that
/// signature and returns NULL or a NUL-terminated string that lives on.
unsafe fn string_from(handle: *mut c_void, name: &CStr) -> Option<String> {
    let p = unsafe { sym(handle, name) };
    if p.is_null() {
        return None;
    }
    // SAFETY: by the contract above.
    let s = unsafe { std::mem::transmute::<*mut c_void, GetStringFn>(p)() };
    if s.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated string, by the contract above.
    let text = unsafe { CStr::from_ptr(s) }.to_string_lossy().trim().to_string();
    (!text.is_empty()).then_some(text)
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
        let (gemm, set_threads, get_threads, config, core) = unsafe {
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
            let config = string_from(handle, c"openblas_get_config");
            let core = string_from(handle, c"openblas_get_corename");
            (gemm, set_threads, get_threads, config, core)
        };
        if gemm.iter().all(Option::is_none) {
            reasons.push(format!("{path}: no sgemm_/dgemm_/cgemm_/zgemm_ symbol"));
            // SAFETY: nothing from this handle is in use.
            unsafe { libc::dlclose(handle) };
            continue;
        }
        let blas = Blas { path: path.to_string(), config, core, gemm, set_threads, get_threads };
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

/// Which system BLAS library was loaded (name, OpenBLAS's configuration line
/// and kernel, and whether that kernel is a fallback below this CPU's level),
/// or `None` when none is available (the BLAS backend then declines).
///
/// ```
/// if let Some(info) = tensorasync::blas_info() {
///     assert!(!info.is_empty());
/// }
/// ```
pub fn blas_info() -> Option<String> {
    blas().ok().map(Blas::describe)
}
