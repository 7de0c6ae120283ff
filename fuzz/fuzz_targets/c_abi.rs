//! Fuzzes the C ABI: each input is a program of ABI calls.
//!
//! The first byte picks the mode:
//! - *model* (a quarter of the inputs): one thread runs only valid calls on
//!   f64 tensors of one shape (fill, scale, axpy, copy, copy_in, failing
//!   kernels, frees and shares), and every result read back with
//!   `ta_copy_out` must equal a sequential model: per-tensor values, or the
//!   poison of a failed kernel propagated by the rules of SPEC §2.2. The
//!   scalars are 0, ±1/2, ±1, ±2, so every product is exact and each result
//!   element is one correctly rounded operation, whatever the kernel's
//!   instructions.
//! - *misuse* (the rest): 2 to 4 threads share pools of handles (tensors,
//!   views, events, a completion queue, a private runtime) and call anything
//!   on anything: valid, NULL, stale (freed), double-freed, forged and
//!   wrong-type handles; random dtypes, ranks, extents, slices, permutations,
//!   modes and scalars; waits, callbacks, completion queues and shutdown.
//!   Any status is fine; a crash, a hang (libFuzzer's -timeout) or an
//!   AddressSanitizer report is not.
//!
//! After every input: every callback of an accepted submission fired
//! exactly once, every wrapped buffer was released exactly once, and
//! `ta_handles_live` is back to its value before the input.

#![no_main]

#[path = "../../capi/tests/cabi/mod.rs"]
mod cabi;

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use cabi::*;
use libfuzzer_sys::fuzz_target;

/// Reads the input as a stream of bytes (zeros once it runs out).
struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn below(&mut self, n: usize) -> usize {
        self.u8() as usize % n
    }
    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |a, _| a << 8 | self.u8() as u64)
    }
    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
}

const NE: *mut *mut ta_event = std::ptr::null_mut();
const NR: *mut *mut ta_error = std::ptr::null_mut();

// ---- callbacks, counted ------------------------------------------------------

/// One flag per callback registered by an input: how often it fired.
const MAX_CALLBACKS: usize = 1 << 14;
static FIRED: [AtomicU8; MAX_CALLBACKS] = [const { AtomicU8::new(0) }; MAX_CALLBACKS];
static REGISTERED: AtomicU32 = AtomicU32::new(0);

/// A slot for one more callback (its userdata), or None when all are used.
fn callback_slot() -> Option<usize> {
    let k = REGISTERED.fetch_add(1, Ordering::Relaxed) as usize;
    (k < MAX_CALLBACKS).then_some(k)
}

unsafe extern "C" fn on_done(_status: ta_status, userdata: *mut c_void) {
    let before = FIRED[userdata as usize].fetch_add(1, Ordering::Relaxed);
    assert_eq!(before, 0, "callback {} fired twice", userdata as usize);
}

/// A registered callback whose registration was refused never fires: its
/// slot is marked so the final check expects nothing.
static REFUSED: [AtomicU8; MAX_CALLBACKS] = [const { AtomicU8::new(0) }; MAX_CALLBACKS];

// ---- wrapped memory, counted -------------------------------------------------

static WRAPPED: AtomicU64 = AtomicU64::new(0);
static RELEASED: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn release_buffer(userdata: *mut c_void, _data: *mut c_void) {
    // SAFETY: userdata is the Box<[f64; 64]> leaked in `wrap`, released once.
    drop(unsafe { Box::from_raw(userdata.cast::<[f64; 64]>()) });
    RELEASED.fetch_add(1, Ordering::Relaxed);
}

// ---- kernels -----------------------------------------------------------------

/// Userdata of a fuzzed kernel: what it returns and whether it sets a message.
unsafe extern "C" fn kernel(views: *const ta_view, n: usize, userdata: *mut c_void, ctx: *mut ta_kernel_ctx) -> ta_status {
    let what = userdata as usize;
    // Touch the first element of every view that has one (reads only: the
    // views' dtypes vary).
    for i in 0..n {
        // SAFETY: the library passes `n` views valid for the call.
        let v = unsafe { &*views.add(i) };
        // SAFETY: `extents` holds `rank` entries.
        let empty = (0..v.rank).any(|k| unsafe { *v.extents.add(k) } == 0);
        if !empty && !v.data.is_null() {
            // SAFETY: a non-empty view's element [0, ...] is at `data`.
            let _ = unsafe { std::ptr::read_volatile(v.data.cast::<u8>()) };
        }
    }
    match what % 4 {
        0 | 1 => TA_STATUS_OK,
        2 => {
            // SAFETY: `ctx` is this call's context; the message is a C string.
            unsafe { ta_kernel_set_error(ctx, c"fuzzed kernel failure".as_ptr()) };
            (what / 4 % 50 + 1) as ta_status
        }
        _ => (what / 4 % 50 + 1) as ta_status,
    }
}

/// The model mode's failing kernel.
unsafe extern "C" fn fail_kernel(_v: *const ta_view, _n: usize, _ud: *mut c_void, _ctx: *mut ta_kernel_ctx) -> ta_status {
    3
}

// ---- model mode --------------------------------------------------------------

#[derive(Clone)]
enum Val {
    Clean(Vec<f64>),
    Poisoned,
}

const SCALARS: [f64; 7] = [0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0];

fn wait_ok(ev: *mut ta_event) -> ta_status {
    // SAFETY: an event handle of this program, freed once here.
    unsafe {
        let st = ta_event_wait(ev, 30_000_000_000);
        assert_eq!(ta_event_free(ev), TA_STATUS_OK);
        st
    }
}

/// `ta_copy_out` of `t` and its final status, checked against the model.
fn check_against_model(t: *mut ta_tensor, want: &Val, n: usize, step: usize) {
    let mut out = vec![f64::NAN; n];
    let mut ev = std::ptr::null_mut();
    // SAFETY: a live tensor of this program; `out` holds `n` elements and
    // outlives the operation (waited for below).
    let st = unsafe { ta_copy_out(t, out.as_mut_ptr().cast(), n, std::ptr::null(), std::ptr::null(), &mut ev, NR) };
    assert_eq!(st, TA_STATUS_OK, "copy_out submission: {}", name(st));
    let done = wait_ok(ev);
    match want {
        Val::Clean(v) => {
            assert_eq!(done, TA_STATUS_OK, "step {step}: copy_out of a clean tensor: {}", name(done));
            for (i, (a, b)) in out.iter().zip(v).enumerate() {
                assert!(a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan(), "step {step}: element {i} is {a}, the model says {b}");
            }
        }
        Val::Poisoned => assert_eq!(done, TA_STATUS_KERNEL_FAILED, "step {step}: copy_out of a poisoned tensor: {}", name(done)),
    }
}

fn model(b: &mut Bytes<'_>) {
    const T: usize = 4;
    let n = 1 + b.below(8);
    let ext = [n];
    let mut ts = [std::ptr::null_mut::<ta_tensor>(); T];
    let mut model: Vec<Val> = vec![Val::Clean(vec![0.0; n]); T];
    for t in &mut ts {
        // SAFETY: valid extents and output pointer.
        let st = unsafe { ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, ext.as_ptr(), TA_ORDER_ROW_MAJOR, t, NR) };
        assert_eq!(st, TA_STATUS_OK);
    }
    // copy_in sources: alive until the end (the program waits before returning).
    let mut sources: Vec<Box<[f64]>> = Vec::new();
    let mut step = 0;
    while !b.done() && step < 256 {
        step += 1;
        let i = b.below(T);
        let j = (i + 1 + b.below(T - 1)) % T;
        let s = SCALARS[b.below(SCALARS.len())];
        let alpha = ta_scalar { re: s, im: 0.0 };
        // SAFETY (every call): live handles of this program and valid arguments.
        unsafe {
            match b.below(9) {
                0 => {
                    let v = b.below(33) as f64 - 16.0;
                    assert_eq!(ta_fill(ts[i], ta_scalar { re: v, im: 0.0 }, std::ptr::null(), NE, NR), TA_STATUS_OK);
                    model[i] = Val::Clean(vec![v; n]);
                }
                1 => {
                    assert_eq!(ta_scale(ts[i], alpha, std::ptr::null(), NE, NR), TA_STATUS_OK);
                    if let Val::Clean(v) = &mut model[i] {
                        v.iter_mut().for_each(|x| *x *= s);
                    }
                }
                2 => {
                    assert_eq!(ta_axpy(ts[i], alpha, ts[j], std::ptr::null(), NE, NR), TA_STATUS_OK);
                    model[i] = match (&model[i], &model[j]) {
                        (Val::Clean(y), Val::Clean(x)) => Val::Clean(y.iter().zip(x).map(|(y, x)| s * x + y).collect()),
                        _ => Val::Poisoned,
                    };
                }
                3 => {
                    assert_eq!(ta_copy(ts[i], ts[j], std::ptr::null(), NE, NR), TA_STATUS_OK);
                    model[i] = model[j].clone();
                }
                4 => {
                    let src: Box<[f64]> = (0..n).map(|_| b.below(17) as f64 - 8.0).collect();
                    assert_eq!(ta_copy_in(ts[i], src.as_ptr().cast(), 1, ext.as_ptr(), std::ptr::null(), std::ptr::null(), NE, NR), TA_STATUS_OK);
                    model[i] = Val::Clean(src.to_vec());
                    sources.push(src);
                }
                5 => {
                    let acc = [ta_access { tensor: ts[i], mode: TA_MODE_UPDATE }];
                    let st = ta_kernel_submit(Some(fail_kernel), std::ptr::null_mut(), c"fail".as_ptr(), acc.as_ptr(), 1, std::ptr::null(), NE, NR);
                    assert_eq!(st, TA_STATUS_OK);
                    model[i] = Val::Poisoned;
                }
                6 => {
                    // Replace the handle by a share of it, freeing the old one
                    // while its work may be pending.
                    let mut sh = std::ptr::null_mut();
                    assert_eq!(ta_tensor_share(ts[i], &mut sh), TA_STATUS_OK);
                    assert_eq!(ta_tensor_free(ts[i]), TA_STATUS_OK);
                    ts[i] = sh;
                }
                7 => check_against_model(ts[i], &model[i], n, step),
                _ => {
                    let mut e = std::ptr::null_mut();
                    let st = ta_tensor_wait(ts[i], -1, &mut e);
                    match &model[i] {
                        Val::Clean(_) => assert_eq!(st, TA_STATUS_OK, "step {step}: wait on a clean tensor: {}", name(st)),
                        Val::Poisoned => {
                            assert_eq!(st, TA_STATUS_KERNEL_FAILED, "step {step}: wait on a poisoned tensor: {}", name(st));
                            assert!(!e.is_null(), "a failed wait gives its error");
                        }
                    }
                    ta_error_free(e);
                }
            }
        }
    }
    for (i, t) in ts.iter().enumerate() {
        check_against_model(*t, &model[i], n, step);
        // SAFETY: each handle is live and freed once.
        assert_eq!(unsafe { ta_tensor_free(*t) }, TA_STATUS_OK);
    }
    drop(sources);
}

// ---- misuse mode -------------------------------------------------------------

const POOL: usize = 8;
const DTYPES: [ta_dtype; 8] = [TA_DTYPE_F64, TA_DTYPE_F32, TA_DTYPE_C128, TA_DTYPE_C64, TA_DTYPE_I32, TA_DTYPE_U8, TA_DTYPE_I64, 0];

/// Handles shared by the threads of one input. A slot's handle is taken out
/// (under the lock) by whoever frees or replaces it; other threads may still
/// hold a copy and use it, which is exactly the stale-handle misuse.
struct Pools {
    tensors: Mutex<[u64; POOL]>,
    events: Mutex<[u64; POOL]>,
    /// Freed handles of any kind, kept for use after free.
    graveyard: Mutex<Vec<u64>>,
    runtime: Mutex<u64>,
    cq: Mutex<u64>,
}

/// Host memory that copies read and write (valid until the input ends,
/// which waits for every operation first).
struct Buffers {
    src: Box<[u8; 2048]>,
    dst: Box<[u8; 2048]>,
}

impl Pools {
    fn put(&self, pool: &Mutex<[u64; POOL]>, at: usize, h: u64, free: unsafe extern "C" fn(u64) -> ta_status) {
        let old = std::mem::replace(&mut pool.lock().unwrap()[at], h);
        if old != 0 {
            // SAFETY: `old` was this pool's; a concurrent misuse may have freed it already (any status is fine).
            unsafe { free(old) };
            self.bury(old);
        }
    }
    fn bury(&self, h: u64) {
        let mut g = self.graveyard.lock().unwrap();
        if g.len() < 64 {
            g.push(h);
        }
    }
    fn dead(&self, b: &mut Bytes<'_>) -> u64 {
        let g = self.graveyard.lock().unwrap();
        if g.is_empty() { 0 } else { g[b.below(g.len())] }
    }
}

unsafe extern "C" fn free_tensor(h: u64) -> ta_status {
    // SAFETY: forwarded; the library validates the handle.
    unsafe { ta_tensor_free(h as *mut ta_tensor) }
}
unsafe extern "C" fn free_event(h: u64) -> ta_status {
    // SAFETY: forwarded; the library validates the handle.
    unsafe { ta_event_free(h as *mut ta_event) }
}

/// A tensor argument: mostly live, sometimes NULL, freed, forged or of another type.
fn tensor_arg(p: &Pools, b: &mut Bytes<'_>) -> *mut ta_tensor {
    let sel = b.u8();
    (match sel {
        0..=199 => p.tensors.lock().unwrap()[sel as usize % POOL],
        200..=224 => p.dead(b),
        225..=234 => p.events.lock().unwrap()[sel as usize % POOL],
        235..=244 => 0,
        _ => b.u64(),
    }) as *mut ta_tensor
}

fn event_arg(p: &Pools, b: &mut Bytes<'_>) -> *mut ta_event {
    let sel = b.u8();
    (match sel {
        0..=209 => p.events.lock().unwrap()[sel as usize % POOL],
        210..=234 => p.dead(b),
        235..=244 => p.tensors.lock().unwrap()[sel as usize % POOL],
        _ => b.u64(),
    }) as *mut ta_event
}

fn shape(b: &mut Bytes<'_>) -> (usize, [usize; 4]) {
    let rank = b.below(4);
    let mut ext = [1usize; 4];
    for e in ext.iter_mut().take(rank) {
        *e = b.below(5);
    }
    (rank, ext)
}

fn scalar(b: &mut Bytes<'_>) -> ta_scalar {
    match b.below(8) {
        0 => ta_scalar { re: f64::NAN, im: 0.0 },
        1 => ta_scalar { re: 0.5, im: 0.0 },
        2 => ta_scalar { re: 1.0, im: 1.0 },
        3 => ta_scalar { re: 1e300, im: 0.0 },
        4 => ta_scalar { re: -3.0, im: 0.0 },
        _ => ta_scalar { re: b.below(5) as f64, im: 0.0 },
    }
}

/// Submission options: default or private runtime, maybe a counted callback
/// and a completion queue entry. Returns the callback's slot, if any.
fn opts(p: &Pools, b: &mut Bytes<'_>) -> (ta_submit, Option<usize>) {
    let mut o = no_opts();
    let sel = b.u8();
    if sel & 1 != 0 {
        o.runtime = *p.runtime.lock().unwrap() as *const ta_runtime;
    }
    let mut slot = None;
    if sel & 2 != 0 {
        slot = callback_slot();
        if let Some(k) = slot {
            o.callback = Some(on_done);
            o.callback_userdata = k as *mut c_void;
        }
    }
    if sel & 4 != 0 {
        o.cq = *p.cq.lock().unwrap() as *const ta_cq;
        o.cq_tag = sel as u64;
    }
    if sel & 0xf8 == 0xf8 {
        o.flags = sel as u32; // unknown flags
    }
    if sel & 0xf8 == 0xf0 {
        o.backends = 1 << 7; // a backend that is not there
    }
    (o, slot)
}

/// After a submission: a refused one's callback must never fire.
fn settle(st: ta_status, slot: Option<usize>) {
    if st != TA_STATUS_OK {
        if let Some(k) = slot {
            REFUSED[k].store(1, Ordering::Relaxed);
        }
    }
}

/// Whether `*ev` got a new event handle, which goes to the pool.
fn keep_event(p: &Pools, b: &mut Bytes<'_>, st: ta_status, ev: *mut ta_event) {
    if st == TA_STATUS_OK && !ev.is_null() {
        p.put(&p.events, b.below(POOL), ev as u64, free_event);
    }
}

fn free_error(e: *mut ta_error) {
    // SAFETY: NULL or an error handle the library gave this program.
    unsafe { ta_error_free(e) };
}

fn misuse_thread(p: &Pools, bufs: &mut Buffers, b: &mut Bytes<'_>) {
    let mut steps = 0;
    while !b.done() && steps < 128 {
        steps += 1;
        let (mut o, slot) = opts(p, b);
        let want_event = b.u8() & 1 == 1;
        let mut ev: *mut ta_event = std::ptr::null_mut();
        let ev_out = if want_event { &mut ev as *mut _ } else { NE };
        let mut err: *mut ta_error = std::ptr::null_mut();
        let err_out = if b.u8() & 1 == 1 { &mut err as *mut _ } else { NR };
        let op = b.below(32);
        // SAFETY (every call below): the handles are whatever the program
        // chose (the library validates them); every pointer argument points
        // to memory of the right size that outlives the call, and buffers
        // that operations use asynchronously live until the input ends
        // (after everything has completed).
        let st: Option<ta_status> = unsafe {
            match op {
                0 | 1 => {
                    let (rank, ext) = shape(b);
                    let dtype = DTYPES[b.below(DTYPES.len())];
                    let mut t = std::ptr::null_mut();
                    let st = if op == 0 {
                        ta_tensor_new_zeros(dtype, TA_DOMAIN_HOST, rank, ext.as_ptr(), b.below(3) as u32, &mut t, err_out)
                    } else {
                        ta_tensor_new(dtype, if b.u8() == 0 { 3 } else { TA_DOMAIN_HOST }, &mut t, err_out)
                    };
                    if st == TA_STATUS_OK {
                        p.put(&p.tensors, b.below(POOL), t as u64, free_tensor);
                    }
                    None
                }
                2 => {
                    // Wrap a buffer of 64 f64 that the release callback frees.
                    let (rank, ext) = shape(b);
                    let buf = Box::into_raw(Box::new([0.0f64; 64]));
                    let mut t = std::ptr::null_mut();
                    let neg = [-1isize, 4, 16, 1];
                    let strides = if b.u8() & 1 == 1 && rank > 0 { neg.as_ptr() } else { std::ptr::null() };
                    let data = if strides.is_null() { buf.cast::<c_void>() } else { buf.cast::<f64>().add(63 - 4 * 3 - 16 * 3).cast() };
                    let st = ta_tensor_wrap(TA_DTYPE_F64, rank, ext.as_ptr(), strides, TA_ORDER_ROW_MAJOR, data, Some(release_buffer), buf.cast(), &mut t, err_out);
                    if st == TA_STATUS_OK {
                        WRAPPED.fetch_add(1, Ordering::Relaxed);
                        p.put(&p.tensors, b.below(POOL), t as u64, free_tensor);
                    } else {
                        drop(Box::from_raw(buf));
                    }
                    None
                }
                3 => {
                    let t = tensor_arg(p, b);
                    let mut sh = std::ptr::null_mut();
                    if ta_tensor_share(t, &mut sh) == TA_STATUS_OK {
                        p.put(&p.tensors, b.below(POOL), sh as u64, free_tensor);
                    }
                    None
                }
                4 => {
                    let t = tensor_arg(p, b);
                    let n = b.below(5);
                    let mut sl = [ta_slice { start: 0, stop: 0, step: 1, drop: 0 }; 4];
                    for s in sl.iter_mut().take(n) {
                        *s = ta_slice {
                            start: b.below(6) as i64 - 1,
                            stop: b.below(7) as i64 - 1,
                            step: [1, 1, 2, -1, 0, 3][b.below(6)],
                            drop: (b.below(4) == 0) as i32,
                        };
                    }
                    let mut v = std::ptr::null_mut();
                    if ta_tensor_slice(t, sl.as_ptr(), n, &mut v, err_out) == TA_STATUS_OK {
                        p.put(&p.tensors, b.below(POOL), v as u64, free_tensor);
                    }
                    None
                }
                5 => {
                    let t = tensor_arg(p, b);
                    let rank = b.below(4);
                    let perm = [b.below(4), b.below(4), b.below(4), b.below(4)];
                    let mut v = std::ptr::null_mut();
                    let st = match b.below(4) {
                        0 => ta_tensor_transpose(t, &mut v, err_out),
                        1 => ta_tensor_conj(t, &mut v, err_out),
                        2 => {
                            let (r, ext) = shape(b);
                            ta_tensor_reshape(t, r, ext.as_ptr(), b.below(2) as u32, &mut v, err_out)
                        }
                        _ => ta_tensor_permute(t, perm.as_ptr(), rank, &mut v, err_out),
                    };
                    if st == TA_STATUS_OK {
                        p.put(&p.tensors, b.below(POOL), v as u64, free_tensor);
                    }
                    None
                }
                6 => {
                    // Free a pooled tensor (its work may be pending), or misuse a free.
                    if b.u8() < 200 {
                        let at = b.below(POOL);
                        let h = std::mem::take(&mut p.tensors.lock().unwrap()[at]);
                        ta_tensor_free(h as *mut ta_tensor);
                        if h != 0 {
                            p.bury(h);
                        }
                    } else {
                        ta_tensor_free(tensor_arg(p, b)); // stale, wrong type, forged: a status
                    }
                    None
                }
                7 => Some(ta_fill(tensor_arg(p, b), scalar(b), &o, ev_out, err_out)),
                8 => Some(ta_scale(tensor_arg(p, b), scalar(b), &o, ev_out, err_out)),
                9 => Some(ta_axpy(tensor_arg(p, b), scalar(b), tensor_arg(p, b), &o, ev_out, err_out)),
                10 => Some(ta_copy(tensor_arg(p, b), tensor_arg(p, b), &o, ev_out, err_out)),
                11 => {
                    let (rank, ext) = shape(b);
                    // At most 64 elements of 16 bytes: inside `src`.
                    Some(ta_copy_in(tensor_arg(p, b), bufs.src.as_ptr().cast(), rank, ext.as_ptr(), std::ptr::null(), &o, ev_out, err_out))
                }
                12 => {
                    // The capacity in elements of the widest dtype, so any dtype fits.
                    let t = tensor_arg(p, b);
                    let cap = b.below(2048 / 16 + 1);
                    Some(ta_copy_out(t, bufs.dst.as_mut_ptr().cast(), cap, std::ptr::null(), &o, ev_out, err_out))
                }
                13 => {
                    let axes = [b.below(4), b.below(4)];
                    Some(ta_sum(tensor_arg(p, b), tensor_arg(p, b), b.below(3), axes.as_ptr(), &o, ev_out, err_out))
                }
                14 => Some(ta_dot(tensor_arg(p, b), tensor_arg(p, b), tensor_arg(p, b), b.below(2) as i32, &o, ev_out, err_out)),
                15 => Some(ta_norm2(tensor_arg(p, b), tensor_arg(p, b), &o, ev_out, err_out)),
                16 => Some(ta_gemm(tensor_arg(p, b), scalar(b), tensor_arg(p, b), tensor_arg(p, b), scalar(b), &o, ev_out, err_out)),
                17 => {
                    let perm = [b.below(4), b.below(4), b.below(4)];
                    Some(ta_permute(tensor_arg(p, b), tensor_arg(p, b), b.below(4), perm.as_ptr(), &o, ev_out, err_out))
                }
                18 => Some(ta_conj(tensor_arg(p, b), tensor_arg(p, b), &o, ev_out, err_out)),
                19 | 20 => {
                    let n = b.below(4);
                    let mut acc = [ta_access { tensor: std::ptr::null(), mode: 0 }; 3];
                    for a in acc.iter_mut().take(n) {
                        *a = ta_access { tensor: tensor_arg(p, b), mode: [1, 2, 3, 1, 2, 0, 9][b.below(7)] };
                    }
                    let k = if b.u8() == 0 { None } else { Some(kernel as unsafe extern "C" fn(_, _, _, _) -> _) };
                    Some(ta_kernel_submit(k, b.u8() as usize as *mut c_void, c"fuzzed".as_ptr(), acc.as_ptr(), n, &o, ev_out, err_out))
                }
                21 => {
                    // No callback: cloning a view schedules nothing, so a
                    // callback would have nothing to report.
                    o.callback = None;
                    let mut copy = std::ptr::null_mut();
                    let st = ta_tensor_clone(tensor_arg(p, b), &o, &mut copy, ev_out, err_out);
                    if st == TA_STATUS_OK {
                        p.put(&p.tensors, b.below(POOL), copy as u64, free_tensor);
                    }
                    keep_event(p, b, st, ev);
                    None
                }
                22 => {
                    let timeout = [0i64, 1_000_000, -1][b.below(3)];
                    let mut e = std::ptr::null_mut();
                    ta_tensor_wait(tensor_arg(p, b), timeout, &mut e);
                    free_error(e);
                    let mut ext = [0usize; 4];
                    let mut r = 0usize;
                    let t = tensor_arg(p, b);
                    ta_tensor_rank(t, &mut r);
                    ta_tensor_extents(t, ext.as_mut_ptr(), b.below(5));
                    None
                }
                23 => {
                    let e = event_arg(p, b);
                    match b.below(4) {
                        0 => {
                            ta_event_poll(e);
                        }
                        1 => {
                            ta_event_wait(e, [0i64, 1_000_000, -1][b.below(3)]);
                        }
                        2 => {
                            let mut x = std::ptr::null_mut();
                            ta_event_error(e, &mut x);
                            free_error(x);
                        }
                        _ => {
                            ta_event_notify(e, *p.cq.lock().unwrap() as *const ta_cq, 7);
                        }
                    }
                    None
                }
                24 => {
                    let e = event_arg(p, b);
                    if let Some(k) = callback_slot() {
                        let st = ta_event_on_complete(e, Some(on_done), k as *mut c_void);
                        settle(st, Some(k));
                    }
                    None
                }
                25 => {
                    if b.u8() < 200 {
                        let at = b.below(POOL);
                        let h = std::mem::take(&mut p.events.lock().unwrap()[at]);
                        ta_event_free(h as *mut ta_event);
                        if h != 0 {
                            p.bury(h);
                        }
                    } else {
                        ta_event_free(event_arg(p, b));
                    }
                    None
                }
                26 => {
                    // Drain the completion queue (entries' errors are handles to free).
                    let mut out = [ta_completion { tag: 0, status: 0, error: std::ptr::null_mut() }; 8];
                    let mut n = 0usize;
                    if ta_cq_poll(*p.cq.lock().unwrap() as *const ta_cq, out.as_mut_ptr(), b.below(9), &mut n) == TA_STATUS_OK {
                        for c in &out[..n] {
                            free_error(c.error);
                        }
                    }
                    None
                }
                27 => {
                    // Shut the private runtime down (later submissions to it fail).
                    let rt = *p.runtime.lock().unwrap() as *const ta_runtime;
                    let mode = b.below(3) as u32;
                    ta_runtime_shutdown(rt, mode, err_out);
                    None
                }
                28 => {
                    let rt = *p.runtime.lock().unwrap() as *const ta_runtime;
                    ta_runtime_wait_idle(rt, [0i64, 1_000_000][b.below(2)], err_out);
                    None
                }
                29 => {
                    let mut e = std::ptr::null_mut();
                    ta_last_error(&mut e);
                    free_error(e);
                    None
                }
                30 => {
                    // A handle of one kind freed as another.
                    let h = p.events.lock().unwrap()[b.below(POOL)];
                    ta_tensor_free(h as *mut ta_tensor);
                    ta_error_free(h as *mut ta_error);
                    ta_runtime_free(p.tensors.lock().unwrap()[b.below(POOL)] as *mut ta_runtime);
                    None
                }
                _ => {
                    let e = event_arg(p, b);
                    let mut s = 0;
                    ta_error_status(e as *const ta_error, &mut s); // wrong type
                    None
                }
            }
        };
        if let Some(st) = st {
            settle(st, slot);
            keep_event(p, b, st, ev);
        } else if let Some(k) = slot {
            REFUSED[k].store(1, Ordering::Relaxed); // the options were not used
        }
        if !err.is_null() {
            free_error(err);
        }
    }
}

fn misuse(b: &mut Bytes<'_>) {
    let threads = 2 + b.below(3);
    let mut rt = std::ptr::null_mut();
    let mut cq = std::ptr::null_mut();
    // SAFETY: valid output pointers.
    unsafe {
        assert_eq!(ta_runtime_new(1 + b.below(2), &mut rt, NR), TA_STATUS_OK);
        assert_eq!(ta_cq_new(&mut cq, NR), TA_STATUS_OK);
    }
    let pools = Pools {
        tensors: Mutex::new([0; POOL]),
        events: Mutex::new([0; POOL]),
        graveyard: Mutex::new(Vec::new()),
        runtime: Mutex::new(rt as u64),
        cq: Mutex::new(cq as u64),
    };
    // Split the rest of the input among the threads.
    let rest = &b.data[b.pos.min(b.data.len())..];
    let chunk = rest.len().div_ceil(threads).max(1);
    let mut buffers: Vec<Buffers> = (0..threads).map(|_| Buffers { src: Box::new([0x3f; 2048]), dst: Box::new([0; 2048]) }).collect();
    std::thread::scope(|s| {
        for (part, bufs) in rest.chunks(chunk).zip(buffers.iter_mut()) {
            let pools = &pools;
            s.spawn(move || misuse_thread(pools, bufs, &mut Bytes { data: part, pos: 0 }));
        }
    });
    // Everything submitted completes (the default runtime's work, then the
    // private runtime's, drained by its free), then every handle goes.
    // SAFETY: handles of this input, each freed once; the buffers outlive
    // every operation that used them (all complete before they drop).
    unsafe {
        let mut def = std::ptr::null_mut();
        assert_eq!(ta_runtime_default(&mut def), TA_STATUS_OK);
        assert_eq!(ta_runtime_wait_idle(def, 60_000_000_000, NR), TA_STATUS_OK, "the default runtime did not get idle");
        assert_eq!(ta_runtime_free(def), TA_STATUS_OK);
        assert_eq!(ta_runtime_free(rt), TA_STATUS_OK);
        for h in pools.tensors.into_inner().unwrap() {
            ta_tensor_free(h as *mut ta_tensor);
        }
        for h in pools.events.into_inner().unwrap() {
            ta_event_free(h as *mut ta_event);
        }
        let mut out = [ta_completion { tag: 0, status: 0, error: std::ptr::null_mut() }; 64];
        loop {
            let mut n = 0usize;
            assert_eq!(ta_cq_poll(cq, out.as_mut_ptr(), out.len(), &mut n), TA_STATUS_OK);
            for c in &out[..n] {
                free_error(c.error);
            }
            if n == 0 {
                break;
            }
        }
        assert_eq!(ta_cq_free(cq), TA_STATUS_OK);
        // Work that freed tensors still had pending ran on the default runtime.
        let mut def = std::ptr::null_mut();
        assert_eq!(ta_runtime_default(&mut def), TA_STATUS_OK);
        assert_eq!(ta_runtime_wait_idle(def, 60_000_000_000, NR), TA_STATUS_OK);
        assert_eq!(ta_runtime_free(def), TA_STATUS_OK);
    }
    drop(buffers);
}

fuzz_target!(|data: &[u8]| {
    let start = live_handles();
    REGISTERED.store(0, Ordering::Relaxed);
    for k in 0..MAX_CALLBACKS {
        FIRED[k].store(0, Ordering::Relaxed);
        REFUSED[k].store(0, Ordering::Relaxed);
    }
    let (wrapped, released) = (WRAPPED.load(Ordering::Relaxed), RELEASED.load(Ordering::Relaxed));
    let mut b = Bytes { data, pos: 0 };
    if b.u8() % 4 == 0 {
        model(&mut b);
    } else {
        misuse(&mut b);
    }
    let registered = (REGISTERED.load(Ordering::Relaxed) as usize).min(MAX_CALLBACKS);
    for k in 0..registered {
        let want = 1 - REFUSED[k].load(Ordering::Relaxed);
        assert_eq!(FIRED[k].load(Ordering::Relaxed), want, "callback {k} fired {} times, expected {want}", FIRED[k].load(Ordering::Relaxed));
    }
    assert_eq!(WRAPPED.load(Ordering::Relaxed) - wrapped, RELEASED.load(Ordering::Relaxed) - released, "wrapped buffers not released");
    assert_eq!(live_handles(), start, "handles leaked by this input");
});
