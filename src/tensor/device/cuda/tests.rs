//! Unit tests of CUDA loading (they need no GPU).

use std::ffi::CString;
use std::panic::catch_unwind;

use cudarc::cublas::sys as bl;

use super::blas::*;
use super::device::probe;
use super::driver::*;
use super::loader::*;
use crate::error::Status;

#[test]
fn probe_without_driver_is_a_reason_not_a_panic() {
    let first = catch_unwind(probe).expect("probe must not panic");
    let second = catch_unwind(probe).expect("probe must not panic the second time");
    match (&first, &second) {
        (Err(a), Err(b)) => {
            println!("probe: {a}");
            assert!(!a.is_empty());
            assert_eq!(a, b, "a repeated probe gives the same reason");
        }
        (Ok(a), Ok(b)) => {
            println!("probe found {} CUDA devices", a.len());
            assert_eq!(a.len(), b.len());
        }
        _ => panic!("probe answered differently twice"),
    }
}

#[test]
fn no_libcuda_here_means_not_found() {
    let c = CString::new("libcuda.so.1").unwrap();
    // SAFETY: a NUL-terminated name; the handle is closed at once.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
    if !h.is_null() {
        // SAFETY: h came from dlopen just above.
        unsafe { libc::dlclose(h) };
        println!("this machine has libcuda.so.1; nothing to check");
        return;
    }
    let Err(why) = probe() else { panic!("no driver library: probe must fail") };
    assert!(why.contains("libcuda.so.1 not found"), "{why}");
    assert!(why.contains("cannot open shared object file"), "{why}");
}

#[test]
fn a_missing_library_is_an_error_not_a_panic() {
    let fake = vec!["libtensorasync-no-such-driver.so.1".to_string()];
    let Err(why) = catch_unwind(|| load_driver(&fake)).expect("no panic") else { panic!("must fail") };
    assert!(why.starts_with("libtensorasync-no-such-driver.so.1 not found:"), "{why}");
    let why = catch_unwind(|| load_cublas(&fake)).expect("no panic").expect_err("must fail");
    assert!(why.contains("not found"), "{why}");
    assert!(load_driver(&[]).is_err());
}

#[test]
fn a_library_without_the_symbols_is_an_error() {
    // libc opens everywhere and has none of the driver's symbols.
    let libc_names = vec!["libc.so.6".to_string()];
    let Err(why) = load_driver(&libc_names) else { panic!("libc is no CUDA driver") };
    assert!(why.contains("lacks cuGetErrorName"), "{why}");
    let why = load_cublas(&libc_names).expect_err("libc is no cuBLAS");
    assert!(why.contains("lacks cublasCreate_v2"), "{why}");
}

#[test]
fn loader_names_match_the_messages() {
    let cuda = cudarc::get_lib_name_candidates("cuda");
    assert!(cuda.iter().any(|n| n == "libcuda.so.1"), "{cuda:?}");
    let blas = cudarc::get_lib_name_candidates("cublas");
    assert_eq!(preferred_versioned(&blas, "libcublas.so"), "libcublas.so.13", "{blas:?}");
    for want in ["libcublas.so.13", "libcublas.so.12", "libcublas.so.11"] {
        assert!(blas.iter().any(|n| n == want), "{want} missing from {blas:?}");
    }
}

#[test]
fn status_texts() {
    assert!(cublas_status_text(7).starts_with("CUBLAS_STATUS_INVALID_VALUE"));
    assert!(cublas_status_text(12345).starts_with("CUBLAS_STATUS_UNKNOWN"));
    let e = blas_ck(bl::cublasStatus_t::CUBLAS_STATUS_ALLOC_FAILED, "cublasCreate").unwrap_err();
    assert_eq!(e.status(), Status::OutOfMemory);
    let e = blas_ck(bl::cublasStatus_t::CUBLAS_STATUS_INVALID_VALUE, "cublasDgemm").unwrap_err();
    assert_eq!(e.status(), Status::CudaError);
    assert!(e.message().contains("cublasDgemm"), "{}", e.message());
    // Without a loaded driver the text still names the code.
    if DRIVER.get().is_none_or(|d| d.is_err()) {
        assert!(error_text(700).contains("700"));
    }
}

#[test]
fn cublas_unavailable_is_its_own_status() {
    // Only meaningful where cuBLAS is absent (this machine); elsewhere it loads.
    if let Err(e) = cublas() {
        assert_eq!(e.status(), Status::CudaUnavailable);
        assert!(e.message().contains("cuBLAS is not available"), "{}", e.message());
    }
}
