//! Releasing the last count of a value or view while operations enrolled on
//! it may still point at it: the count moves into a release task behind them.

use std::sync::Arc;

use super::exec;
use super::work::Released;
use crate::region::Region;
use crate::tensor::counted::Release;
use crate::tensor::value::Value;
use crate::tensor::view::View;

/// Let go of a counted reference to `value` (see [`crate::tensor::value::ValueRc`]).
///
/// Every count of a value goes here, under the value's lock, so a count
/// that is not the last stays not the last until it has gone. The last one
/// goes at once if nothing enrolled on the value is unfinished; otherwise it
/// moves into a release task that runs after everything enrolled so far, so
/// that the value outlives the tasks that point at it without a count.
pub(crate) fn release_value(value: Arc<Value>) {
    let ptr = Arc::as_ptr(&value);
    // SAFETY: the value stays alive while it is used: see `release_under`.
    release_under(unsafe { &*ptr }, value, &Region::Full, |last| {
        Released::Value(crate::tensor::value::ValueRc::new(last))
    });
}

/// Let go of a counted reference to `view` (see [`crate::tensor::view::ViewRc`]),
/// under its root value's lock, as [`release_value`] does for values. A
/// last count that moves into a release task lets go of the view's contents
/// first (see [`View::release_contents`]).
pub(crate) fn release_view(view: Arc<View>) {
    let ptr = Arc::as_ptr(view.root.arc());
    // SAFETY: the view's count of its root keeps the value alive while it is
    // used: see `release_under`. (No count of the value is taken here: every
    // count of a value must go under its lock, see `ValueRc`.)
    // The operations that point at the view without a count are those
    // enrolled through it: its release waits for its own elements only, so
    // later work on other elements is not held behind it. (An empty view's
    // operations touch no element, and only a whole-value wait is behind them.)
    let region = match &view.region {
        Region::Empty => Region::Full,
        r => r.clone(),
    };
    release_under(unsafe { &*ptr }, view, &region, |mut last| {
        if let Some(view) = Arc::get_mut(&mut last) {
            view.release_contents();
        }
        Released::View(last)
    });
}

impl Release for Value {
    fn release(count: Arc<Value>) {
        release_value(count)
    }
}

impl Release for View {
    fn release(count: Arc<View>) {
        release_view(count)
    }
}

/// Drop `count` under `value`'s lock; if it is the last one and operations
/// are still enrolled on `value`, move it (made into `Released`) into a
/// release task behind those on `region` instead.
///
/// `value` must stay alive while `count` lives: `count` goes only after the
/// lock's guard (when it is the last), or while other counts remain (which
/// can only go under this lock), or moves into the release task, which
/// cannot run before the guard goes.
fn release_under<T>(value: &Value, count: Arc<T>, region: &Region, released: impl FnOnce(Arc<T>) -> Released) {
    let mut s = value.state.lock();
    if Arc::strong_count(&count) > 1 {
        drop(count);
        return;
    }
    if s.queue.is_idle() {
        drop(s);
        drop(count);
        return;
    }
    let task = exec::release(released(count));
    s.queue.enroll_barrier(&task, region);
    drop(s);
    if task.release_guard() {
        exec::run(task);
    }
}
