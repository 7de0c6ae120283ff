//! Allocation failures during submission (build with `--features failpoints`):
//! a failed allocation of the task, the event, the event's handle or a
//! view's region returns TA_STATUS_OUT_OF_MEMORY with a message saying what
//! could not be allocated, writes no output, enrolls nothing (later results
//! are those of the program without the failed call) and leaks nothing
//! (`ta_handles_live` is back where it was).
#![cfg(feature = "failpoints")]

mod cabi;

use cabi::*;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};

use ta::failpoint::{armed, fail_nth, Site};

const NR: *mut *mut ta_error = std::ptr::null_mut();

/// The tests compare the process-wide handle count: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn tensor(values: &[f64]) -> *mut ta_tensor {
    let mut t = std::ptr::null_mut();
    let ext = [values.len()];
    // SAFETY: valid extents, data and output pointer.
    unsafe {
        assert_eq!(
            ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, ext.as_ptr(), TA_ORDER_ROW_MAJOR, &mut t, NR),
            TA_STATUS_OK
        );
        let mut ev = std::ptr::null_mut();
        assert_eq!(
            ta_copy_in(t, values.as_ptr().cast(), 1, ext.as_ptr(), std::ptr::null(), std::ptr::null(), &mut ev, NR),
            TA_STATUS_OK
        );
        assert_eq!(ta_event_wait(ev, -1), TA_STATUS_OK);
        assert_eq!(ta_event_free(ev), TA_STATUS_OK);
    }
    t
}

fn read(t: *mut ta_tensor, n: usize) -> Vec<f64> {
    let mut out = vec![f64::NAN; n];
    let mut ev = std::ptr::null_mut();
    // SAFETY: `out` holds n elements and outlives the copy (waited for).
    unsafe {
        assert_eq!(
            ta_copy_out(t, out.as_mut_ptr().cast(), n, std::ptr::null(), std::ptr::null(), &mut ev, NR),
            TA_STATUS_OK
        );
        assert_eq!(ta_event_wait(ev, -1), TA_STATUS_OK);
        assert_eq!(ta_event_free(ev), TA_STATUS_OK);
    }
    out
}

/// Checks a failed call: OUT_OF_MEMORY, the error's message names `what`,
/// the event output untouched, the failpoint used up.
fn expect_oom(st: ta_status, ev: *mut ta_event, err: *mut ta_error, site: Site, what: &str) {
    assert_eq!(st, TA_STATUS_OUT_OF_MEMORY, "{site:?}: got {}", name(st));
    assert_eq!(ev as usize, 0x5e, "{site:?}: the event output was written");
    assert!(!err.is_null(), "{site:?}: no error object");
    let msg = message_of(err);
    // (A handle that cannot be made is a full handle table, however it fails.)
    let says = if site == Site::Handle {
        msg.contains("handle table is full")
    } else {
        msg.contains("out of memory") && msg.contains(what)
    };
    assert!(says, "{site:?}: message {msg:?}");
    let mut s = 0;
    // SAFETY: a live error handle, freed once.
    unsafe {
        assert_eq!(ta_error_status(err, &mut s), TA_STATUS_OK);
        assert_eq!(ta_error_free(err), TA_STATUS_OK);
    }
    assert_eq!(s, TA_STATUS_OUT_OF_MEMORY);
    assert!(!armed(site), "{site:?}: the failpoint was not reached");
}

/// Each submission site, on operations of one and two operands, with and
/// without the failed call's callback: the failed call changes nothing.
#[test]
fn a_failed_submission_allocation_enrolls_nothing_and_leaks_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    unsafe extern "C" fn count(_s: ta_status, _ud: *mut std::ffi::c_void) {
        CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    /// Zeroes its first operand (which would show if it ran).
    unsafe extern "C" fn zero_y(
        views: *const ta_view,
        _n: usize,
        _ud: *mut std::ffi::c_void,
        _ctx: *mut ta_kernel_ctx,
    ) -> ta_status {
        // SAFETY: view 0 is `y`, a 1-d f64 tensor of 3 elements, writable during the call.
        unsafe {
            let v = &*views;
            for i in 0..3 {
                *v.data.cast::<f64>().offset(i * *v.strides) = 0.0;
            }
        }
        TA_STATUS_OK
    }
    let x = tensor(&[1.0, 2.0, 3.0]);
    let y = tensor(&[10.0, 20.0, 30.0]);
    let start = live_handles();
    let mut want_y = vec![10.0, 20.0, 30.0];
    let mut opts = no_opts();
    opts.callback = Some(count);
    for (site, what) in [(Site::Task, "task"), (Site::Event, "event"), (Site::Handle, "handle")] {
        for op in 0..3 {
            fail_nth(site, 1);
            let mut ev = 0x5e as *mut ta_event;
            let mut err = std::ptr::null_mut();
            let two = ta_scalar { re: 2.0, im: 0.0 };
            // SAFETY: live handles, valid options and output pointers.
            let st = unsafe {
                match op {
                    0 => ta_scale(y, two, &opts, &mut ev, &mut err),
                    1 => ta_axpy(y, two, x, &opts, &mut ev, &mut err),
                    _ => {
                        let acc = [
                            ta_access { tensor: y, mode: TA_MODE_UPDATE },
                            ta_access { tensor: x, mode: TA_MODE_READ },
                        ];
                        ta_kernel_submit(
                            Some(zero_y),
                            std::ptr::null_mut(),
                            c"k".as_ptr(),
                            acc.as_ptr(),
                            2,
                            &opts,
                            &mut ev,
                            &mut err,
                        )
                    }
                }
            };
            expect_oom(st, ev, err, site, what);
            assert_eq!(live_handles(), start, "{site:?}, op {op}: handles leaked");
            // The same call without the failure runs, once.
            let mut ev = std::ptr::null_mut();
            // SAFETY: as above.
            let st = unsafe { ta_scale(y, ta_scalar { re: 3.0, im: 0.0 }, &opts, &mut ev, NR) };
            assert_eq!(st, TA_STATUS_OK);
            // SAFETY: the event just made, freed once.
            unsafe {
                assert_eq!(ta_event_wait(ev, -1), TA_STATUS_OK);
                assert_eq!(ta_event_free(ev), TA_STATUS_OK);
            }
            want_y.iter_mut().for_each(|v| *v *= 3.0);
            assert_eq!(read(y, 3), want_y, "{site:?}, op {op}: the failed call ran");
            assert_eq!(read(x, 3), vec![1.0, 2.0, 3.0]);
            assert_eq!(live_handles(), start);
        }
    }
    // Only the successful submissions' callbacks fired.
    // SAFETY: live tensor handles, freed once; the wait leaves no work pending.
    unsafe {
        assert_eq!(ta_tensor_wait(y, -1, NR), TA_STATUS_OK);
        assert_eq!(CALLS.load(std::sync::atomic::Ordering::SeqCst), 9);
        assert_eq!(ta_tensor_free(x), TA_STATUS_OK);
        assert_eq!(ta_tensor_free(y), TA_STATUS_OK);
    }
}

/// An armed site counts its allocations: the first ones succeed, the n-th
/// fails; a submission without an event allocates none.
#[test]
fn the_nth_allocation_fails_and_only_allocations_count() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = tensor(&[1.0, 1.0]);
    let start = live_handles();
    fail_nth(Site::Event, 2);
    let one = ta_scalar { re: 1.0, im: 0.0 };
    // SAFETY: live handles and valid output pointers.
    unsafe {
        // No event asked: no event allocated.
        assert_eq!(ta_scale(t, one, std::ptr::null(), std::ptr::null_mut(), NR), TA_STATUS_OK);
        assert!(armed(Site::Event));
        let mut ev = std::ptr::null_mut();
        assert_eq!(ta_scale(t, one, std::ptr::null(), &mut ev, NR), TA_STATUS_OK, "the first event succeeds");
        assert_eq!(ta_event_wait(ev, -1), TA_STATUS_OK);
        assert_eq!(ta_event_free(ev), TA_STATUS_OK);
        let mut ev = 0x5e as *mut ta_event;
        let mut err = std::ptr::null_mut();
        let st = ta_scale(t, one, std::ptr::null(), &mut ev, &mut err);
        expect_oom(st, ev, err, Site::Event, "event");
        assert_eq!(live_handles(), start);
        assert_eq!(ta_tensor_free(t), TA_STATUS_OK);
    }
}

/// With a NULL `event_out`, every kind of submission (one and two operands,
/// linear algebra, a kernel, a deep copy) makes no event and takes no
/// handle slot for one: with both sites armed, each call succeeds and
/// leaves them armed.
#[test]
fn a_submission_without_event_out_makes_no_event_and_takes_no_handle() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    /// Counts its runs in the `AtomicU32` behind `ud`.
    unsafe extern "C" fn count(_v: *const ta_view, _n: usize, ud: *mut c_void, _ctx: *mut ta_kernel_ctx) -> ta_status {
        // SAFETY: `ud` is the test's counter, which outlives the runtime's work.
        unsafe { &*ud.cast::<AtomicU32>() }.fetch_add(1, Ordering::SeqCst);
        TA_STATUS_OK
    }
    let runs = AtomicU32::new(0);
    let x = tensor(&[1.0, 2.0, 3.0]);
    let y = tensor(&[10.0, 20.0, 30.0]);
    let z = tensor(&[0.0, 0.0, 0.0]);
    let start = live_handles();
    let none = std::ptr::null_mut();
    let two = ta_scalar { re: 2.0, im: 0.0 };
    fail_nth(Site::Event, 1);
    fail_nth(Site::Handle, 1);
    let mut copy = std::ptr::null_mut();
    // SAFETY: live handles, NULL options and event outputs.
    unsafe {
        assert_eq!(ta_scale(y, two, std::ptr::null(), none, NR), TA_STATUS_OK);
        assert_eq!(ta_axpy(y, two, x, std::ptr::null(), none, NR), TA_STATUS_OK);
        assert_eq!(ta_conj(z, y, std::ptr::null(), none, NR), TA_STATUS_OK);
        let acc = [ta_access { tensor: z, mode: TA_MODE_UPDATE }];
        let ud = (&runs as *const AtomicU32).cast_mut().cast();
        let st = ta_kernel_submit(Some(count), ud, c"k".as_ptr(), acc.as_ptr(), 1, std::ptr::null(), none, NR);
        assert_eq!(st, TA_STATUS_OK);
        assert!(armed(Site::Handle), "only a handle for the clone is made below");
        fail_nth(Site::Handle, 0);
        assert_eq!(ta_tensor_clone(z, std::ptr::null(), &mut copy, none, NR), TA_STATUS_OK);
    }
    assert!(armed(Site::Event), "a submission without event_out made an event");
    fail_nth(Site::Event, 0);
    assert_eq!(read(y, 3), vec![22.0, 44.0, 66.0]);
    assert_eq!(read(z, 3), vec![22.0, 44.0, 66.0]);
    assert_eq!(read(copy, 3), vec![22.0, 44.0, 66.0]);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(live_handles(), start + 1);
    // SAFETY: live tensor handles, freed once.
    unsafe {
        for t in [x, y, z, copy] {
            assert_eq!(ta_tensor_free(t), TA_STATUS_OK);
        }
    }
}

/// A view whose region is allocated (a partial slice, a permutation of
/// part of a tensor) fails to be made, leaving nothing behind; the tensor
/// keeps working and its views made afterwards see its values.
#[test]
fn a_failed_region_allocation_makes_no_view() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = tensor(&[1.0, 2.0, 3.0, 4.0]);
    let start = live_handles();
    let half = [ta_slice { start: 0, stop: 2, step: 1, drop: 0 }];
    fail_nth(Site::Region, 1);
    let mut v = 0x5e as *mut ta_tensor;
    let mut err = std::ptr::null_mut();
    // SAFETY: a live handle, valid slice specs and output pointers.
    unsafe {
        let st = ta_tensor_slice(t, half.as_ptr(), 1, &mut v, &mut err);
        expect_oom(st, 0x5e as *mut ta_event, err, Site::Region, "region");
        assert_eq!(v as usize, 0x5e, "the view output was written");
        assert_eq!(live_handles(), start);
        // A slice of everything needs no region allocation: not affected.
        fail_nth(Site::Region, 1);
        let all = [ta_slice { start: 0, stop: 4, step: 1, drop: 0 }];
        let mut w = std::ptr::null_mut();
        assert_eq!(ta_tensor_slice(t, all.as_ptr(), 1, &mut w, NR), TA_STATUS_OK);
        assert!(armed(Site::Region));
        fail_nth(Site::Region, 0);
        assert_eq!(ta_tensor_free(w), TA_STATUS_OK);
        let mut v = std::ptr::null_mut();
        assert_eq!(ta_tensor_slice(t, half.as_ptr(), 1, &mut v, NR), TA_STATUS_OK);
        assert_eq!(
            ta_scale(v, ta_scalar { re: 10.0, im: 0.0 }, std::ptr::null(), std::ptr::null_mut(), NR),
            TA_STATUS_OK
        );
        assert_eq!(ta_tensor_free(v), TA_STATUS_OK);
    }
    assert_eq!(read(t, 4), vec![10.0, 20.0, 3.0, 4.0]);
    // SAFETY: a live handle, freed once.
    assert_eq!(unsafe { ta_tensor_free(t) }, TA_STATUS_OK);
    assert_eq!(live_handles(), start - 1);
}
