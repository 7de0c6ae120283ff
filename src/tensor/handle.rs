//! Tensor handles (SPEC §2): a [`Tensor`] is a durable handle to a whole
//! value, a view of one, or a coalesced view of several blocks of a block
//! array. Cloning a handle shares it; dropping one releases its count of the
//! value (see [`crate::tensor::counted`]), never blocking.
//!
//! The methods here describe and derive handles without submitting
//! anything. Those that submit operations or wait (creation with contents,
//! copies, waits) are defined above the runtime, in `ops/tensor_ops.rs`.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::domain::Domain;
use crate::dtype::DType;
use crate::error::{Error, Result, Status};
use crate::layout::{Extents, Layout, Order};
use crate::region::Region;
use crate::tensor::coalesced::Coalesced;
use crate::tensor::storage::{ReleaseFn, Storage};
use crate::tensor::value::{check_domain, Contents, Value, ValueRc};
use crate::tensor::view::{self, SliceSpec, View, ViewRc};

static FULL_REGION: Region = Region::Full;

/// A handle to an asynchronous tensor: a whole value, or a view of one (see
/// the view module). Cloning the handle shares it (same data, same epoch
/// queue: a structural copy); [`Tensor::deep_copy`] makes a new value with
/// a copy of the elements.
/// Releasing a handle never blocks, and pending operations keep the data alive.
#[derive(Clone)]
pub struct Tensor(pub(crate) Repr);

/// A whole value is one pointer, so plain tensors stay as small as they can.
#[derive(Clone)]
pub(crate) enum Repr {
    Value(ValueRc),
    View(ViewRc),
    /// Several blocks of a block array as one view (several hazard records).
    Coalesced(Arc<Coalesced>),
}

/// The hazard records a handle orders on, each with the region it touches:
/// one for a value or a view, one per covered block for a coalesced view.
pub(crate) enum Hazards<'a> {
    One(Option<(&'a Arc<Value>, &'a Region)>),
    Many(std::slice::Iter<'a, ValueRc>),
}

impl<'a> Iterator for Hazards<'a> {
    type Item = (&'a Arc<Value>, &'a Region);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Hazards::One(x) => x.take(),
            Hazards::Many(it) => it.next().map(|v| (v.arc(), &FULL_REGION)),
        }
    }
}

impl Tensor {
    fn whole(v: Arc<Value>) -> Tensor {
        Tensor(Repr::Value(ValueRc::new(v)))
    }

    /// A handle to a new value holding `contents` (which the caller has
    /// filled, or will fill with the tensor's first operation).
    pub(crate) fn of_contents(dtype: DType, domain: Domain, contents: Arc<Contents>) -> Tensor {
        Tensor::whole(Value::new(dtype, domain, Some(contents), false))
    }

    /// A handle to an existing value (a block of a block array).
    pub(crate) fn of_value(v: ValueRc) -> Tensor {
        Tensor(Repr::Value(v))
    }

    fn of_view(v: View) -> Tensor {
        Tensor(Repr::View(ViewRc::new(Arc::new(v))))
    }

    pub(crate) fn of_coalesced(c: Coalesced) -> Tensor {
        Tensor(Repr::Coalesced(Arc::new(c)))
    }

    /// The value (hazard record) this handle orders on: itself, a view's
    /// root, or a coalesced view's first block.
    #[inline]
    pub(crate) fn root(&self) -> &Arc<Value> {
        match &self.0 {
            Repr::Value(v) => v.arc(),
            Repr::View(v) => v.root.arc(),
            Repr::Coalesced(c) => c.members[0].arc(),
        }
    }

    /// Every hazard record this handle orders on, with its region.
    pub(crate) fn hazards(&self) -> Hazards<'_> {
        match &self.0 {
            Repr::Value(v) => Hazards::One(Some((v.arc(), &FULL_REGION))),
            Repr::View(v) => Hazards::One(Some((v.root.arc(), &v.region))),
            Repr::Coalesced(c) => Hazards::Many(c.members.iter()),
        }
    }

    /// The one hazard record of a value or a view, with its region (`None`
    /// for a coalesced view, which has several).
    #[inline]
    pub(crate) fn single_hazard(&self) -> Option<(&Arc<Value>, &Region)> {
        match &self.0 {
            Repr::Value(v) => Some((v.arc(), &FULL_REGION)),
            Repr::View(v) => Some((v.root.arc(), &v.region)),
            Repr::Coalesced(_) => None,
        }
    }

    /// The coalesced view, if this handle is one.
    pub(crate) fn coalesced(&self) -> Option<&Coalesced> {
        match &self.0 {
            Repr::Coalesced(c) => Some(c),
            _ => None,
        }
    }

    /// The view, if this handle is one.
    pub(crate) fn view(&self) -> Option<&View> {
        match &self.0 {
            Repr::View(v) => Some(v),
            _ => None,
        }
    }

    /// An unconstructed tensor: dtype and domain known, no shape yet. An
    /// overwrite (copy-in, copy) constructs it.
    ///
    /// ```
    /// use tensorasync::{ops, DType, Domain, Order, Status, Submit, Tensor};
    /// let t = Tensor::unconstructed(DType::F32, Domain::Host).unwrap();
    /// assert!(t.extents().is_none());
    /// assert_eq!(t.wait(None).unwrap_err().status(), Status::Unconstructed);
    /// // An overwrite gives it a shape.
    /// let src = Tensor::from_slice(&[2], Order::RowMajor, &[1.0f32, 2.0]).unwrap();
    /// ops::copy(&t, &src, Submit::default()).unwrap();
    /// assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    /// ```
    pub fn unconstructed(dtype: DType, domain: Domain) -> Result<Tensor> {
        check_domain(domain, "tensor_new")?;
        Ok(Tensor::whole(Value::new(dtype, domain, None, false)))
    }

    /// ownership). A `writable == false` tensor, or one whose strides make
    /// elements overlap, is read-only: every write to it is rejected at submission.
    ///
    /// # Safety
    /// `ptr` is the address of element offset 0 of `layout` (negative strides
    /// reach below it). It must stay valid for reads (and writes, if writable)
    /// of every element `layout` addresses until `release` runs, and nothing
    /// else may write it meanwhile.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use tensorasync::{ops, DType, Layout, Order, Scalar, Submit, Tensor};
    /// let mut data = vec![1.0f64, 2.0, 3.0];
    /// let (tx, rx) = mpsc::channel();
    /// let release: tensorasync::ReleaseFn = Box::new(move || tx.send(()).unwrap());
    /// let layout = Layout::contiguous(&[3], Order::RowMajor);
    /// // SAFETY: `data` outlives the tensor: it is read again only after `release` ran.
    /// let t = unsafe { Tensor::wrap(DType::F64, layout, data.as_mut_ptr().cast(), true, Some(release)) }.unwrap();
    /// ops::scale(&t, Scalar::real(2.0), Submit::default()).unwrap();
    /// drop(t);
    /// rx.recv().unwrap(); // released after the scale
    /// assert_eq!(data, vec![2.0, 4.0, 6.0]);
    /// ```
    pub unsafe fn wrap(
        dtype: DType,
        layout: Layout,
        ptr: *mut u8,
        writable: bool,
        release: Option<ReleaseFn>,
    ) -> Result<Tensor> {
        let origin = "tensor_wrap";
        let Some(base) = std::ptr::NonNull::new(ptr) else {
            return Err(Error::new(Status::NullPointer, origin, "data pointer is NULL"));
        };
        if (ptr as usize) % dtype.align() != 0 {
            return Err(Error::new(
                Status::InvalidArgument,
                origin,
                format!("data pointer is not aligned for {}", dtype.name()),
            ));
        }
        // The storage starts at the lowest element the layout reaches, which
        // lies below `ptr` when strides are negative.
        let too_large = || Error::new(Status::InvalidArgument, origin, "layout is too large");
        let (lo, shift, bytes) = match layout.checked_byte_span(dtype.size()) {
            Some((first, last)) => (layout.checked_span().ok_or_else(too_large)?.0, first, (last - first + 1) as usize),
            None if layout.is_empty() => (0, 0, 0),
            None => return Err(too_large()),
        };
        let mut layout = layout;
        layout.offset -= lo;
        // SAFETY: by the caller's contract every addressed element is valid
        // memory, and the lowest one is `lo` elements from `ptr`.
        let base = unsafe { std::ptr::NonNull::new_unchecked(base.as_ptr().offset(shift)) };
        let read_only = !writable || !layout.is_non_overlapping();
        // SAFETY: forwarded from the caller.
        let storage = unsafe { Storage::wrap(base, bytes, release) };
        Ok(Tensor::whole(Value::new(dtype, Domain::Host, Some(Contents::owning(storage, layout)), read_only)))
    }

    /// Element type.
    ///
    /// ```
    /// use tensorasync::{DType, Order, Tensor};
    /// assert_eq!(Tensor::from_slice(&[1], Order::RowMajor, &[1i16]).unwrap().dtype(), DType::I16);
    /// ```
    #[inline]
    pub fn dtype(&self) -> DType {
        self.root().dtype()
    }

    /// Domain (host or CUDA device).
    ///
    /// ```
    /// use tensorasync::{DType, Domain, Order, Tensor};
    /// let t = Tensor::zeros(DType::F64, &[2], Order::RowMajor, Domain::Host).unwrap();
    /// assert_eq!(t.domain(), Domain::Host);
    /// ```
    #[inline]
    pub fn domain(&self) -> Domain {
        self.root().domain()
    }

    /// Whether writes to this tensor are rejected (read-only memory, conj views).
    ///
    /// ```
    /// use tensorasync::{ops, Order, Scalar, Status, Submit, Tensor};
    /// let t = Tensor::from_slice(&[2], Order::RowMajor, &[1.0f64, 2.0]).unwrap();
    /// assert!(!t.is_read_only());
    /// let c = t.conj().unwrap();
    /// assert!(c.is_read_only());
    /// assert_eq!(ops::scale(&c, Scalar::real(2.0), Submit::default()).unwrap_err().status(), Status::ReadOnly);
    /// ```
    pub fn is_read_only(&self) -> bool {
        match &self.0 {
            Repr::Value(v) => v.read_only(),
            Repr::View(v) => v.read_only,
            Repr::Coalesced(c) => c.read_only,
        }
    }

    /// Whether this handle is a view of another value (coalesced block views included).
    ///
    /// ```
    /// use tensorasync::{Order, Tensor};
    /// let t = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1u8, 2, 3, 4]).unwrap();
    /// assert!(!t.is_view() && !t.clone().is_view());
    /// assert!(t.transpose().unwrap().is_view());
    /// ```
    pub fn is_view(&self) -> bool {
        !matches!(self.0, Repr::Value(_))
    }

    /// Whether reads through this handle conjugate (a conj view of a complex tensor).
    ///
    /// ```
    /// use num_complex::Complex64;
    /// use tensorasync::{Order, Tensor};
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[Complex64::new(1.0, 1.0)]).unwrap();
    /// assert!(!t.is_conj());
    /// let c = t.conj().unwrap();
    /// assert!(c.is_conj());
    /// assert_eq!(c.to_vec::<Complex64>().unwrap(), vec![Complex64::new(1.0, -1.0)]);
    /// ```
    pub fn is_conj(&self) -> bool {
        match &self.0 {
            Repr::Value(_) => false,
            Repr::View(v) => v.conj,
            Repr::Coalesced(c) => c.conj,
        }
    }

    /// The extents as known at submission time, `None` while unconstructed.
    ///
    /// ```
    /// use tensorasync::{DType, Domain, Order, Tensor};
    /// let t = Tensor::zeros(DType::F32, &[4, 5], Order::RowMajor, Domain::Host).unwrap();
    /// assert_eq!(t.extents().unwrap().as_slice(), &[4, 5]);
    /// assert!(Tensor::unconstructed(DType::F32, Domain::Host).unwrap().extents().is_none());
    /// ```
    pub fn extents(&self) -> Option<Extents> {
        self.layout().map(|l| l.extents)
    }

    /// The layout as known at submission time, `None` while unconstructed.
    /// (For a view, the offset is relative to the root's storage.)
    ///
    /// ```
    /// use tensorasync::{DType, Order, SliceSpec, Tensor};
    /// let t = Tensor::zeros(DType::F32, &[4, 5], Order::ColMajor, Default::default()).unwrap();
    /// assert_eq!(t.layout().unwrap().strides.as_slice(), &[1, 4]);
    /// // A view's offset counts from the root's storage: element [1, 2] is at 1 + 2·4.
    /// let v = t.slice(&[SliceSpec::range(1, 3), SliceSpec::range(2, 5)]).unwrap();
    /// assert_eq!(v.layout().unwrap().offset, 9);
    /// ```
    pub fn layout(&self) -> Option<Layout> {
        match &self.0 {
            Repr::Value(v) => v.state.lock().layout().cloned(),
            Repr::View(v) => Some(v.layout.clone()),
            Repr::Coalesced(c) => Some(c.layout.clone()),
        }
    }

    /// An identity for the value (its epoch queue): equal for handles that
    /// share the value, views included.
    ///
    /// ```
    /// use tensorasync::{DType, Order, Tensor};
    /// let t = Tensor::zeros(DType::F64, &[2, 2], Order::RowMajor, Default::default()).unwrap();
    /// let u = Tensor::zeros(DType::F64, &[2, 2], Order::RowMajor, Default::default()).unwrap();
    /// assert_eq!(t.value_id(), t.transpose().unwrap().value_id());
    /// assert_ne!(t.value_id(), u.value_id());
    /// ```
    pub fn value_id(&self) -> usize {
        Arc::as_ptr(self.root()) as usize
    }

    /// Whether two handles order on the same value (the same epoch queue).
    ///
    /// ```
    /// use tensorasync::{DType, Order, Tensor};
    /// let t = Tensor::zeros(DType::F64, &[2, 2], Order::RowMajor, Default::default()).unwrap();
    /// assert!(t.same_value(&t.transpose().unwrap()));
    /// let (copy, _) = t.deep_copy(Default::default()).unwrap();
    /// assert!(!t.same_value(&copy));
    /// ```
    pub fn same_value(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(self.root(), other.root())
    }

    /// Derive a new view from this handle seen as a view: `f` makes it from
    /// a view of a value; `g` makes the same view of a coalesced block view
    /// (which keeps enrolling in every covered block).
    fn derive(
        &self,
        origin: &'static str,
        f: impl FnOnce(&View) -> Result<View>,
        g: impl FnOnce(&Coalesced) -> Result<Coalesced>,
    ) -> Result<Tensor> {
        let v = match &self.0 {
            Repr::View(v) => f(v)?,
            Repr::Value(v) => f(&View::of_root(v, origin)?)?,
            Repr::Coalesced(c) => return Ok(Tensor::of_coalesced(g(c)?)),
        };
        Ok(Tensor::of_view(v))
    }

    /// A view of some elements: one [`SliceSpec`] per axis (a range with a step,
    /// possibly negative, or one index that drops the axis).
    ///
    /// ```
    /// use tensorasync::{Order, SliceSpec, Tensor};
    /// let t = Tensor::from_slice(&[2, 3], Order::RowMajor, &[1i32, 2, 3, 4, 5, 6]).unwrap();
    /// // Row 1, columns in reverse (a negative step: from 2 down to 0).
    /// let v = t.slice(&[SliceSpec::index(1), SliceSpec { start: 2, stop: -1, step: -1, drop: false }]).unwrap();
    /// assert_eq!(v.extents().unwrap().as_slice(), &[3]);
    /// assert_eq!(v.to_vec::<i32>().unwrap(), vec![6, 5, 4]);
    /// ```
    pub fn slice(&self, specs: &[SliceSpec]) -> Result<Tensor> {
        self.derive("tensor_slice", |v| v.slice(specs), |c| Ok(c.with_layout(view::sliced(&c.layout, specs)?.0)))
    }

    /// A view with axes reordered: axis `j` of the result is axis `perm[j]` of this one.
    ///
    /// ```
    /// use tensorasync::{DType, Order, Tensor};
    /// let t = Tensor::zeros(DType::F32, &[2, 3, 4], Order::RowMajor, Default::default()).unwrap();
    /// let p = t.permute(&[2, 0, 1]).unwrap();
    /// assert_eq!(p.extents().unwrap().as_slice(), &[4, 2, 3]);
    /// assert_eq!(p.layout().unwrap().strides.as_slice(), &[1, 12, 4]);
    /// assert!(t.permute(&[0, 0, 1]).is_err());
    /// ```
    pub fn permute(&self, perm: &[usize]) -> Result<Tensor> {
        self.derive("tensor_permute", |v| v.permute(perm), |c| Ok(c.with_layout(view::permuted(&c.layout, perm)?.0)))
    }

    /// A view with the axes in reverse order (the matrix transpose for rank 2).
    ///
    /// ```
    /// use tensorasync::{Order, Tensor};
    /// let t = Tensor::from_slice(&[2, 3], Order::RowMajor, &[1u8, 2, 3, 4, 5, 6]).unwrap();
    /// let tr = t.transpose().unwrap();
    /// assert_eq!(tr.extents().unwrap().as_slice(), &[3, 2]);
    /// assert_eq!(tr.to_vec::<u8>().unwrap(), vec![1, 4, 2, 5, 3, 6]);
    /// ```
    pub fn transpose(&self) -> Result<Tensor> {
        let rank = self
            .extents()
            .ok_or_else(|| Error::new(Status::Unconstructed, "tensor_transpose", "the tensor is unconstructed"))?
            .len();
        let perm: SmallVec<[usize; 4]> = (0..rank).rev().collect();
        self.derive(
            "tensor_transpose",
            |v| v.permute(&perm),
            |c| Ok(c.with_layout(view::permuted(&c.layout, &perm)?.0)),
        )
    }

    /// A read-only conjugate view: lazy for complex dtypes (kernels read the
    /// elements conjugated), the identity for real ones. The conj of a conj
    /// reads the original values.
    ///
    /// ```
    /// use num_complex::Complex32;
    /// use tensorasync::{Order, Tensor};
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[Complex32::new(1.0, 2.0)]).unwrap();
    /// assert_eq!(t.conj().unwrap().to_vec::<Complex32>().unwrap(), vec![Complex32::new(1.0, -2.0)]);
    /// assert_eq!(t.conj().unwrap().conj().unwrap().to_vec::<Complex32>().unwrap(), vec![Complex32::new(1.0, 2.0)]);
    /// ```
    pub fn conj(&self) -> Result<Tensor> {
        self.derive("tensor_conj", |v| Ok(v.conjugate()), |c| Ok(c.conjugate()))
    }

    /// A view with new extents over the same elements read in `order`; the
    /// elements must be dense in that order (`NotContiguous` otherwise).
    ///
    /// ```
    /// use tensorasync::{Order, Status, Tensor};
    /// let t = Tensor::from_slice(&[2, 3], Order::RowMajor, &[1i32, 2, 3, 4, 5, 6]).unwrap();
    /// let r = t.reshape(&[3, 2], Order::RowMajor).unwrap();
    /// assert_eq!(r.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4, 5, 6]);
    /// assert_eq!(r.to_array::<i32>().unwrap()[[2, 0]], 5);
    /// // A transposed view is not dense in row-major order.
    /// let e = t.transpose().unwrap().reshape(&[6], Order::RowMajor).unwrap_err();
    /// assert_eq!(e.status(), Status::NotContiguous);
    /// ```
    pub fn reshape(&self, extents: &[usize], order: Order) -> Result<Tensor> {
        self.derive(
            "tensor_reshape",
            |v| v.reshape(extents, order),
            |c| Ok(c.with_layout(view::reshaped(&c.layout, extents, order)?)),
        )
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("dtype", &self.dtype())
            .field("domain", &self.domain())
            .field("extents", &self.extents())
            .finish()
    }
}
