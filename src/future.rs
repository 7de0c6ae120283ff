//! Completion as futures: an [`Event`] is a `Future` of its operation's
//! outcome and a [`CompletionQueue`] is a `Stream` of its entries. Both wake
//! the awaiting task from the completing thread itself (no polling thread),
//! so they work with any executor.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;

use crate::error::Result;
use crate::runtime::cq::{CompletionEntry, CompletionQueue};
use crate::runtime::event::Event;

/// Awaiting an event gives its operation's outcome; the task is woken by the
/// thread that completes the operation.
///
/// ```
/// use tensorasync::{ops, DType, Order, Scalar, Submit, Tensor};
/// let t = Tensor::zeros(DType::F64, &[4], Order::RowMajor, Default::default()).unwrap();
/// let ev = ops::fill(&t, Scalar::real(1.5), Submit::default()).unwrap();
/// futures::executor::block_on(ev).unwrap();
/// assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.5; 4]);
/// ```
impl Future for Event {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        match self.poll_waker(cx.waker()) {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }
}

/// A completion queue is an endless stream of its entries, oldest first (it
/// never ends: more operations may report to it). Taking an entry through the
/// stream is the same as [`CompletionQueue::poll`] taking it: each entry is
/// delivered once, to one consumer.
///
/// ```
/// use futures::StreamExt;
/// use tensorasync::{ops, CompletionQueue, DType, Order, Scalar, Submit, Tensor};
/// let cq = CompletionQueue::new().unwrap();
/// let t = Tensor::zeros(DType::F32, &[2], Order::RowMajor, Default::default()).unwrap();
/// ops::fill(&t, Scalar::real(2.0), Submit { cq: Some((&cq, 7)), ..Default::default() }).unwrap();
/// let mut stream = cq.clone();
/// let entry = futures::executor::block_on(stream.next()).unwrap();
/// assert_eq!(entry.tag, 7);
/// assert!(entry.result.is_ok());
/// ```
impl Stream for CompletionQueue {
    type Item = CompletionEntry;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<CompletionEntry>> {
        match self.poll_waker(cx.waker()) {
            Some(e) => Poll::Ready(Some(e)),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[test]
    fn event_wakes_on_completion() {
        let ev = Event::new();
        let ev2 = ev.clone();
        let h = std::thread::spawn(move || futures::executor::block_on(ev2));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!h.is_finished(), "the future completed before its event");
        ev.complete(&Ok(()));
        h.join().unwrap().unwrap();
        // Awaiting a completed event is ready at once.
        futures::executor::block_on(ev).unwrap();
    }

    #[test]
    fn stream_wakes_on_push() {
        let cq = CompletionQueue::new().unwrap();
        let mut s = cq.clone();
        let h = std::thread::spawn(move || {
            futures::executor::block_on(async { vec![s.next().await.unwrap().tag, s.next().await.unwrap().tag] })
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!h.is_finished());
        cq.push(CompletionEntry { tag: 3, result: Ok(()) });
        cq.push(CompletionEntry { tag: 4, result: Ok(()) });
        assert_eq!(h.join().unwrap(), vec![3, 4]);
        assert!(cq.is_empty());
    }
}
