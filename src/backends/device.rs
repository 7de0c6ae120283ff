//! The device backend: operations on device tensors, queued on a device's
//! streams through the [`Device`] trait, whatever implements it (the CUDA
//! driver in `crate::tensor::device::cuda`, or the simulated device). Its family is
//! [`BackendKind::Cuda`] and it names itself "cuda" in errors.
//!
//! `run` never waits for the device. It picks a stream (the stream of its
//! same-device predecessor, so a chain stays on one stream; otherwise the
//! next one round robin), makes it wait for the markers of other
//! predecessors, queues the work and reports it in [`RunCtx::issued`]; the
//! runtime then records a marker and asks the device to signal when the work
//! is done. Host sides of transfers go through page-locked staging buffers:
//! packed on the worker before the upload is queued, unpacked by the
//! finisher after the download is done, so user memory is only touched
//! while the operation holds it and no copy ever blocks a worker.
//!
//! It declines (before queuing anything) what the device calls cannot do:
//! negative strides on the device side, conjugating device-to-device
//! copies, conj `x` in axpy, gemm layouts cuBLAS cannot take, and scalars
//! held in device tensors.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use smallvec::SmallVec;

use super::native::copy_layouts;
use crate::dispatch::backend::{Backend, BackendKind, Issued, Outcome, RunCtx};
use crate::dispatch::op::{HostBuffer, KernelOp, OpTag, ScalarSlot};
use crate::domain::Domain;
use crate::dtype::with_element_type;
use crate::dtype::{DType, Element, Imm, Scalar};
use crate::error::{Error, Result, Status};
use crate::kernels::blas_plan;
use crate::kernels::gemm::gemm_check;
use crate::kernels::mat2::Mat2;
use crate::kernels::operand::Operand;
use crate::layout::{for_each_plane, for_each_run, Layout, Order};
use crate::resolved::ResolvedView;
use crate::tensor::device::{self, DevPtr, Device, GemmArgs, Place, StreamId, Trans};

/// The backend for device tensors (every CUDA device, real or simulated).
pub(crate) struct DeviceBackend;

/// What `run` decided: decline, or queue with this plan.
type Planned<T> = std::result::Result<T, String>;

impl Backend for DeviceBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }
    fn name(&self) -> &'static str {
        "cuda"
    }
    fn offers(&self, tag: OpTag, dtype: DType, domain: Domain) -> bool {
        matches!(domain, Domain::Cuda(_))
            && match tag {
                OpTag::Fill | OpTag::Copy | OpTag::CopyIn | OpTag::CopyOut => true,
                OpTag::Scale | OpTag::Axpy | OpTag::Gemm => dtype.is_float(),
                _ => false,
            }
    }
    fn run(&self, op: &KernelOp, v: &[ResolvedView<'_>], cx: &mut RunCtx) -> Outcome {
        let Some(ordinal) = v.iter().find_map(|x| match x.domain {
            Domain::Cuda(d) => Some(d),
            Domain::Host => None,
        }) else {
            return Outcome::Declined("no operand is on a device".into());
        };
        let dev = match device::device(ordinal) {
            Ok(d) => d,
            Err(e) => return Outcome::Done(Err(e)),
        };
        // Plan first (a decline must come before anything is queued).
        let plan = match plan(op, v) {
            Ok(Plan::Fail(e)) => return Outcome::Done(Err(e)),
            Ok(p) => p,
            Err(why) => return Outcome::Declined(why),
        };
        let stream = match join(&*dev, cx) {
            Ok(s) => s,
            Err(e) => return Outcome::Done(Err(e)),
        };
        let mut issued = Issued { device: dev.clone(), stream, finisher: None, keep: SmallVec::new() };
        // SAFETY: the views come from granted accesses: their elements lie in
        // live storage (device memory for device views) that no other task
        // writes meanwhile, and host buffers are valid by the caller's
        // contract until the operation completes; the storage and staging
        // buffers stay alive until the finish (`Issued::keep`, the task's
        // operands), which comes after the device work is done.
        let r = unsafe { queue(&*dev, stream, plan, v, &mut issued) };
        cx.issued = Some(issued);
        Outcome::Done(r)
    }
}

/// The stream to queue on, after making it wait for the predecessors' markers.
fn join(dev: &dyn Device, cx: &RunCtx) -> Result<StreamId> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let stream = match cx.waits.first() {
        Some((s, _)) => *s,
        None => StreamId(NEXT.fetch_add(1, Ordering::Relaxed) % dev.streams().max(1)),
    };
    for (s, marker) in &cx.waits {
        if *s != stream {
            dev.wait_marker(stream, marker)?;
        }
    }
    Ok(stream)
}

/// A planned operation.
enum Plan<'a> {
    Fill(Imm),
    Scale(Scalar),
    Axpy(Scalar),
    /// Device to device.
    CopyDevice,
    /// Host memory (a host view, or a caller's buffer) to a device view.
    Upload {
        conj: bool,
        buf: Option<&'a HostBuffer>,
    },
    /// A device view to host memory (a host view, or a caller's buffer).
    Download {
        conj: bool,
        buf: Option<&'a HostBuffer>,
    },
    Gemm(DType, GemmArgs),
    /// Nothing to queue (an empty result).
    Nothing,
    /// Fails without queuing anything (a shape error found at run time).
    Fail(Error),
}

fn no_negative(v: &ResolvedView<'_>, what: &str) -> Planned<()> {
    if v.extents.iter().zip(v.strides).any(|(&e, &s)| e > 1 && s < 0) {
        return Err(format!("{what} has a negative stride on the device"));
    }
    Ok(())
}

fn immediate(s: ScalarSlot) -> Planned<Scalar> {
    match s {
        ScalarSlot::Imm(x) => Ok(x),
        ScalarSlot::View(_) => Err("scalars held in tensors are not supported for device operations".into()),
    }
}

fn plan<'a>(op: &'a KernelOp, v: &[ResolvedView<'_>]) -> Planned<Plan<'a>> {
    let on_device = |x: &ResolvedView<'_>| x.domain != Domain::Host;
    Ok(match op {
        KernelOp::Fill(s) => Plan::Fill(*s),
        KernelOp::Scale(s) => Plan::Scale(s.scalar()),
        KernelOp::Axpy(s) => {
            if v[1].conj && v[1].dtype.is_complex() {
                return Err("cuBLAS axpy cannot conjugate x".into());
            }
            Plan::Axpy(*s)
        }
        KernelOp::Copy => {
            let (dst, src) = (&v[0], &v[1]);
            let conj = src.conj && src.dtype.is_complex();
            match (on_device(dst), on_device(src)) {
                (true, true) if conj => return Err("a conjugating device-to-device copy needs a kernel".into()),
                (true, true) => {
                    no_negative(dst, "the destination")?;
                    no_negative(src, "the source")?;
                    Plan::CopyDevice
                }
                (true, false) => {
                    no_negative(dst, "the destination")?;
                    Plan::Upload { conj, buf: None }
                }
                (false, true) => {
                    no_negative(src, "the source")?;
                    Plan::Download { conj, buf: None }
                }
                (false, false) => return Err("no operand is on a device".into()),
            }
        }
        KernelOp::CopyIn(buf) => {
            no_negative(&v[0], "the destination")?;
            Plan::Upload { conj: false, buf: Some(buf) }
        }
        KernelOp::CopyOut(buf) => {
            no_negative(&v[0], "the source")?;
            Plan::Download { conj: v[0].conj && v[0].dtype.is_complex(), buf: Some(buf) }
        }
        KernelOp::Gemm { alpha, beta } => gemm_plan(v, immediate(*alpha)?, beta.map(immediate).transpose()?)?,
        _ => return Err(format!("{:?} has no device implementation", op.tag())),
    })
}

/// Queue the planned work.
///
/// # Safety
/// See the call in [`DeviceBackend::run`].
unsafe fn queue(
    dev: &dyn Device,
    s: StreamId,
    plan: Plan<'_>,
    v: &[ResolvedView<'_>],
    issued: &mut Issued,
) -> Result<()> {
    match plan {
        Plan::Fill(x) => unsafe { fill(dev, s, &v[0], x) },
        Plan::Scale(a) => unsafe { scale(dev, s, &v[0], a) },
        Plan::Axpy(a) => unsafe { axpy(dev, s, &v[0], a, &v[1]) },
        Plan::CopyDevice => unsafe { copy_planes(dev, s, v[0].dtype, v[0].extents, dev_side(&v[0]), dev_side(&v[1])) },
        Plan::Upload { conj, buf } => {
            let dst = &v[0];
            let (host_ptr, host_layout) = match buf {
                Some(b) => (b.ptr as *const u8, b.layout.clone()),
                None => (v[1].ptr as *const u8, view_layout(&v[1])),
            };
            let stage = Staging::new(dev, dst)?;
            // Pack on this worker, then queue the upload from page-locked memory.
            unsafe { copy_layouts(dst.dtype, stage.ptr, &stage.layout, host_ptr, &host_layout, conj) };
            let r = unsafe { copy_planes(dev, s, dst.dtype, dst.extents, dev_side(dst), stage.side()) };
            issued.keep.push(Box::new(stage));
            r
        }
        Plan::Download { conj, buf } => {
            let (src, host) = if buf.is_some() { (&v[0], None) } else { (&v[1], Some(&v[0])) };
            let stage = Staging::new(dev, src)?;
            let r = unsafe { copy_planes(dev, s, src.dtype, src.extents, stage.side(), dev_side(src)) };
            // Unpack after the download is done (the finisher runs then).
            let (dst_ptr, dst_layout) = match (host, buf) {
                (Some(h), _) => (h.ptr, view_layout(h)),
                (None, Some(b)) => (b.ptr, b.layout.clone()),
                (None, None) => unreachable!("a download has a host side"),
            };
            let (dtype, from, from_layout) = (src.dtype, SendPtr(stage.ptr), stage.layout.clone());
            let to = SendPtr(dst_ptr);
            issued.keep.push(Box::new(stage));
            issued.finisher = Some(Box::new(move || {
                let (to, from) = (to, from);
                // SAFETY: the staging buffer (kept alive in `Issued::keep`
                // until after the finisher) holds the downloaded elements in
                // `from_layout`; the destination is held by this operation's
                // write access (a host view) or valid by the caller's
                // contract (a copy-out buffer).
                unsafe { copy_layouts(dtype, to.0, &dst_layout, from.0, &from_layout, conj) };
                Ok(())
            }));
            r
        }
        // SAFETY: the plan checked the leading dimensions against the extents.
        Plan::Gemm(dtype, args) => unsafe { dev.gemm(s, dtype, &args) },
        Plan::Nothing => Ok(()),
        Plan::Fail(e) => Err(e),
    }
}

/// A view's layout relative to its own pointer.
fn view_layout(v: &ResolvedView<'_>) -> Layout {
    Layout { offset: 0, extents: v.extents.into(), strides: v.strides.into() }
}

/// One side of a device copy: where, and strides in elements.
#[derive(Clone)]
struct Side {
    place: Place,
    strides: SmallVec<[isize; 4]>,
}

fn dev_side(v: &ResolvedView<'_>) -> Side {
    Side { place: Place::Device(v.ptr as usize as DevPtr), strides: v.strides.into() }
}

fn offset(p: Place, elems: isize, es: usize) -> Place {
    let by = elems * es as isize;
    match p {
        Place::Host(h) => Place::Host(h.wrapping_offset(by)),
        Place::Device(d) => Place::Device((d as i64 + by as i64) as u64),
    }
}

/// Queue the copy of every element of `src` to `dst` (equal extents,
/// non-negative strides), one 2-D copy per plane where rows are contiguous.
unsafe fn copy_planes(
    dev: &dyn Device,
    s: StreamId,
    dtype: DType,
    extents: &[usize],
    dst: Side,
    src: Side,
) -> Result<()> {
    let es = dtype.size();
    let mut r = Ok(());
    for_each_plane(extents, [0, 0], [&dst.strides, &src.strides], |[od, os], (n, [sd, ss]), (rows, [pd, ps])| {
        if r.is_err() {
            return;
        }
        let (d0, s0) = (offset(dst.place, od, es), offset(src.place, os, es));
        r = if sd == 1 && ss == 1 {
            let width = n * es;
            let (dp, sp) = if rows > 1 { (pd as usize * es, ps as usize * es) } else { (width, width) };
            // SAFETY: the plane lies inside both operands (caller's contract).
            unsafe { dev.copy_2d(s, d0, dp, s0, sp, width, rows) }
        } else {
            // Rows of single elements: one 2-D copy per run.
            (0..rows as isize).try_for_each(|row| {
                let (d, sr) = (offset(d0, row * pd, es), offset(s0, row * ps, es));
                // SAFETY: as above, element by element.
                unsafe { dev.copy_2d(s, d, sd.max(1) as usize * es, sr, ss.max(1) as usize * es, es, n) }
            })
        };
    });
    r
}

/// A view's layout with every negative stride flipped, and the element
/// offset of its lowest element (for order-free work: fill and scale).
fn normalized(v: &ResolvedView<'_>) -> (isize, SmallVec<[isize; 4]>) {
    let mut base = 0isize;
    let strides = v
        .extents
        .iter()
        .zip(v.strides)
        .map(|(&e, &st)| {
            if st < 0 && e > 0 {
                base += st * (e as isize - 1);
            }
            st.abs()
        })
        .collect();
    (base, strides)
}

unsafe fn fill(dev: &dyn Device, s: StreamId, v: &ResolvedView<'_>, x: Imm) -> Result<()> {
    let es = v.dtype.size();
    let mut bytes = [0u8; 16];
    with_element_type!(v.dtype, T => {
        let val = T::from_imm(x);
        // SAFETY: reading the bytes of a plain Copy value of size `es`.
        bytes[..es].copy_from_slice(unsafe { std::slice::from_raw_parts((&val as *const T).cast::<u8>(), es) });
    });
    let word = |w: usize| u32::from_le_bytes(bytes[w * 4..w * 4 + 4].try_into().expect("4 bytes"));
    let (base, strides) = normalized(v);
    let base = v.ptr as usize as i64 + base as i64 * es as i64;
    let words = es / 4;
    let uniform = es >= 4 && (1..words).all(|w| word(w) == word(0));
    let mut r = Ok(());
    for_each_plane(v.extents, [0], [&strides], |[o], (n, [st]), (rows, [p])| {
        if r.is_err() {
            return;
        }
        let start = (base + o as i64 * es as i64) as u64;
        let pitch = if rows > 1 { p as usize * es } else { n * es };
        // SAFETY: the plane lies inside the view, device memory held by this
        // operation's write access.
        r = unsafe {
            if st == 1 && es < 4 {
                let value = if es == 1 { bytes[0] as u32 } else { u16::from_le_bytes([bytes[0], bytes[1]]) as u32 };
                dev.memset_2d(s, start, pitch, value, es, n, rows)
            } else if st == 1 && uniform {
                dev.memset_2d(s, start, pitch, word(0), 4, n * words, rows)
            } else {
                // Each 4-byte word (or the element, below 4 bytes) of every
                // element of each run: rows of one element, `st` apart.
                (0..rows as u64).try_for_each(|row| {
                    let run = start + row * p as u64 * es as u64;
                    if es < 4 {
                        let value =
                            if es == 1 { bytes[0] as u32 } else { u16::from_le_bytes([bytes[0], bytes[1]]) as u32 };
                        dev.memset_2d(s, run, st as usize * es, value, es, 1, n)
                    } else {
                        (0..words)
                            .try_for_each(|w| dev.memset_2d(s, run + 4 * w as u64, st as usize * es, word(w), 4, 1, n))
                    }
                })
            }
        };
    });
    r
}

unsafe fn scale(dev: &dyn Device, s: StreamId, v: &ResolvedView<'_>, a: Scalar) -> Result<()> {
    let es = v.dtype.size();
    let (base, strides) = normalized(v);
    let base = v.ptr as usize as i64 + base as i64 * es as i64;
    let mut r = Ok(());
    for_each_run(v.extents, [0], [&strides], |[o], n, [st]| {
        if r.is_ok() {
            let x = (base + o as i64 * es as i64) as u64;
            // SAFETY: the run lies inside the view, held by this operation.
            r = unsafe { dev.scal(s, v.dtype, n, a, x, st.max(1)) };
        }
    });
    r
}

unsafe fn axpy(dev: &dyn Device, s: StreamId, y: &ResolvedView<'_>, a: Scalar, x: &ResolvedView<'_>) -> Result<()> {
    if y.extents != x.extents {
        return Err(Error::new(
            Status::ShapeMismatch,
            "axpy",
            format!("shapes {:?} and {:?} differ", y.extents, x.extents),
        ));
    }
    let es = y.dtype.size() as i64;
    let (py, px) = (y.ptr as usize as i64, x.ptr as usize as i64);
    // BLAS takes each vector at its lowest address with a signed increment.
    let lowest = |start: i64, n: usize, st: isize| start + es * (st as i64 * (n as i64 - 1)).min(0);
    let mut r = Ok(());
    for_each_run(y.extents, [0, 0], [y.strides, x.strides], |[oy, ox], n, [sy, sx]| {
        if r.is_ok() {
            let (yr, xr) = (lowest(py + oy as i64 * es, n, sy), lowest(px + ox as i64 * es, n, sx));
            let (sy, sx) = if n == 1 { (1, 1) } else { (sy, sx) };
            // SAFETY: both runs lie inside their views, held by this operation.
            r = unsafe { dev.axpy(s, y.dtype, n, a, xr as u64, sx, yr as u64, sy) };
        }
    });
    r
}

/// The cuBLAS call for `C = alpha·A·B [+ beta·C]`, or why cuBLAS cannot take
/// these layouts (the same rules as the system BLAS).
fn gemm_plan(v: &[ResolvedView<'_>], alpha: Scalar, beta: Option<Scalar>) -> Planned<Plan<'static>> {
    let (c, a, b) = (Operand::from(&v[0]), Operand::from(&v[1]), Operand::from(&v[2]));
    if let Err(e) = gemm_check("gemm", &c, &a, &b) {
        return Ok(Plan::Fail(e));
    }
    let (cm, am, bm) = (Mat2::<u8>::from_operand(&c), Mat2::<u8>::from_operand(&a), Mat2::<u8>::from_operand(&b));
    let (m, n, k) = (cm.rows, cm.cols, am.cols);
    if m == 0 || n == 0 {
        return Ok(Plan::Nothing);
    }
    let p = blas_plan::plan(&cm, &am, &bm)?;
    let trans = |t: u8| match t {
        b'N' => Trans::N,
        b'T' => Trans::T,
        _ => Trans::C,
    };
    let (bm_, bn, pa, pb) = if p.swap { (n, m, bm.ptr, am.ptr) } else { (m, n, am.ptr, bm.ptr) };
    Ok(Plan::Gemm(
        c.dtype,
        GemmArgs {
            trans_a: trans(p.ta),
            trans_b: trans(p.tb),
            m: bm_,
            n: bn,
            k,
            alpha,
            a: pa as usize as DevPtr,
            lda: p.lda as usize,
            b: pb as usize as DevPtr,
            ldb: p.ldb as usize,
            beta: beta.unwrap_or(Scalar::real(0.0)),
            c: cm.ptr as usize as DevPtr,
            ldc: p.ldc as usize,
        },
    ))
}

/// A raw pointer moved into a finisher.
#[derive(Copy, Clone)]
struct SendPtr(*mut u8);
// SAFETY: see the finisher's safety comment: the pointee outlives it and is
// accessed by this operation only.
unsafe impl Send for SendPtr {}

/// A page-locked staging buffer laid out like the device view's elements
/// (dense, in the view's axis order where it is dense), so the transfer is
/// one contiguous copy when the view is contiguous. Goes back to a per-device
/// pool when dropped.
struct Staging {
    dev: Arc<dyn Device>,
    ptr: *mut u8,
    cap: usize,
    layout: Layout,
}

// SAFETY: the buffer is plain page-locked host memory owned by this value.
unsafe impl Send for Staging {}

impl Staging {
    fn new(dev: &dyn Device, v: &ResolvedView<'_>) -> Result<Staging> {
        let view = view_layout(v);
        let order = if view.is_col_major_contiguous() && !view.is_row_major_contiguous() {
            Order::ColMajor
        } else {
            Order::RowMajor
        };
        let layout = Layout::contiguous(v.extents, order);
        let bytes = (layout.len() * v.dtype.size()).max(1);
        let dev = device::device(dev.ordinal())?;
        let (ptr, cap) = pool_take(&dev, bytes)?;
        Ok(Staging { dev, ptr, cap, layout })
    }

    fn side(&self) -> Side {
        Side { place: Place::Host(self.ptr), strides: self.layout.strides.iter().copied().collect() }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        pool_put(&self.dev, self.ptr, self.cap);
    }
}

/// Page-locked buffers kept for reuse, per device ordinal: `(capacity, address)`.
type Pools = Mutex<HashMap<u32, Vec<(usize, usize)>>>;

/// The page-locked buffer pools. Allocating page-locked memory is slow (it
/// maps and pins pages), so transfers reuse buffers; at most [`POOL_BYTES`]
/// stay cached per device.
fn pools() -> &'static Pools {
    static POOLS: OnceLock<Pools> = OnceLock::new();
    POOLS.get_or_init(Default::default)
}

const POOL_BYTES: usize = 256 << 20;

fn pool_take(dev: &Arc<dyn Device>, bytes: usize) -> Result<(*mut u8, usize)> {
    {
        let mut p = pools().lock();
        let list = p.entry(dev.ordinal()).or_default();
        if let Some(i) =
            list.iter().enumerate().filter(|(_, (c, _))| *c >= bytes).min_by_key(|(_, (c, _))| *c).map(|(i, _)| i)
        {
            let (cap, addr) = list.swap_remove(i);
            return Ok((addr as *mut u8, cap));
        }
    }
    let cap = bytes.next_power_of_two().max(4096);
    Ok((dev.alloc_host(cap)?, cap))
}

fn pool_put(dev: &Arc<dyn Device>, ptr: *mut u8, cap: usize) {
    let mut p = pools().lock();
    let list = p.entry(dev.ordinal()).or_default();
    let cached: usize = list.iter().map(|(c, _)| c).sum();
    if cached + cap <= POOL_BYTES {
        list.push((cap, ptr as usize));
    } else {
        drop(p);
        // SAFETY: from this device's alloc_host; no queued work uses it (the
        // operation that held it has finished).
        unsafe { dev.free_host(ptr) };
    }
}
