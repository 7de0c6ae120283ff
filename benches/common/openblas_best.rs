// The OpenBLAS peer at its best kernel, for the Rust benches that compare
// against it, as examples-c/bench/openblas_best.h does for the C benches.
// Included (`include!`) at the root of a bench that has the system BLAS
// loader as `mod blas` (src/sysblas/library.rs).

/// Restart this bench with `OPENBLAS_CORETYPE` set from the CPU's flags
/// when the loaded OpenBLAS runs a kernel below the CPU's level (Debian's
/// 0.3.21 falls back to Prescott on AVX-512 Xeons), so that the peer runs
/// the kernel any current OpenBLAS picks there. Call it first in `main`,
/// before any thread starts. `TA_BENCH_KEEP_CORETYPE=1` keeps the kernel as
/// it is; a restart that did not change the kernel is not repeated.
fn openblas_best(candidates: &[&str]) {
    let Ok(lib) = blas::load_from(candidates) else { return };
    let (Some(core), Some(cpu)) = (lib.core.as_deref(), blas::cpu_level()) else { return };
    if blas::fallback_note(core, cpu).is_none() || std::env::var_os("TA_BENCH_KEEP_CORETYPE").is_some() {
        return;
    }
    let want = blas::kernel_for(cpu);
    if std::env::var("OPENBLAS_CORETYPE").is_ok_and(|v| v == want) {
        return;
    }
    use std::os::unix::process::CommandExt;
    let err = match std::env::current_exe() {
        Ok(exe) => std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env("OPENBLAS_CORETYPE", want)
            .exec(),
        Err(e) => e,
    };
    println!("could not restart with OPENBLAS_CORETYPE={want}: {err}");
}

/// The kernel OpenBLAS runs, for the bench's header, and whether a verdict
/// against it may be printed (not against a fallback kernel).
fn openblas_kernel(lib: &blas::Blas) -> (String, bool) {
    let core = lib.core.as_deref().unwrap_or("unknown");
    let how = match std::env::var("OPENBLAS_CORETYPE") {
        Ok(v) => format!("OPENBLAS_CORETYPE={v}"),
        Err(_) => "chosen by OpenBLAS".to_string(),
    };
    let cpu = blas::cpu_level();
    let level = match cpu {
        Some(4) => "AVX-512",
        Some(3) => "AVX2",
        Some(_) => "below AVX2",
        None => "not x86-64",
    };
    match cpu.and_then(|cpu| blas::fallback_note(core, cpu)) {
        Some(note) => (format!("OpenBLAS kernel: {core} ({how}; CPU level {level}): {note}; no verdict against it"), false),
        None => (format!("OpenBLAS kernel: {core} ({how}; CPU level {level})"), true),
    }
}
