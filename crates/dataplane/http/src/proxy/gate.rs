//! A future that is polled only when it asked to be.
//!
//! A client connection's task waits on hyper's connection and, beside it, on things that
//! rarely happen: its idle deadline, the proxy's shutdown phase, a GOAWAY request, tunnels
//! opened by upgrades. A `select!` over all of them polls every one at each wake-up of the
//! task, several times per request, and each poll of a timer, a `Notify` or a channel
//! registers the task's waker again: a tenth of the proxy's own instructions per request.
//! Behind a [`Gate`], the rare ones are polled with a waker of the gate's, and only after that
//! waker fired; otherwise a wake-up costs a flag check.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

pub(super) struct Gate {
    signal: Arc<Signal>,
    /// The waker the gated future is polled with: it sets the flag and wakes the task.
    waker: Waker,
}

struct Signal {
    /// The gated future was woken (or is new) since it was last polled.
    woken: AtomicBool,
    /// The task polling the gate.
    task: Mutex<Option<Waker>>,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(task) = task {
            task.wake();
        }
    }
}

impl Gate {
    pub(super) fn new() -> Self {
        let signal = Arc::new(Signal {
            woken: AtomicBool::new(true),
            task: Mutex::new(None),
        });
        Gate {
            waker: Waker::from(signal.clone()),
            signal,
        }
    }

    /// The next [`Gate::poll`] polls the future: a new one must be polled once to ask for
    /// its wake-ups.
    pub(super) fn open(&self) {
        self.signal.woken.store(true, Ordering::Release);
    }

    /// Polls `inner` if its waker fired since its last poll (or the gate was opened); else
    /// only notes the task to wake.
    pub(super) fn poll<F: Future>(
        &self,
        cx: &mut Context<'_>,
        inner: Pin<&mut F>,
    ) -> Poll<F::Output> {
        {
            let mut task = self
                .signal
                .task
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if !task.as_ref().is_some_and(|t| t.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        // After the task is noted: a wake-up from here on wakes it.
        if !self.signal.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        inner.poll(&mut Context::from_waker(&self.waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts the task's wake-ups.
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// What the futures under test share: their polls, whether they are ready, their waker.
    #[derive(Default)]
    struct Probed {
        polls: AtomicUsize,
        ready: AtomicBool,
        waker: Mutex<Option<Waker>>,
    }

    impl Probed {
        fn polls(&self) -> usize {
            self.polls.load(Ordering::SeqCst)
        }
    }

    /// A future that counts its polls and is ready once `ready` is set.
    struct Probe<'a>(&'a Probed);

    impl Future for Probe<'_> {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.0.polls.fetch_add(1, Ordering::SeqCst);
            *self.0.waker.lock().unwrap() = Some(cx.waker().clone());
            if self.0.ready.load(Ordering::SeqCst) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }
    }

    fn task() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    #[test]
    fn the_future_is_polled_first_then_only_after_its_waker_fired_and_that_wakes_the_task() {
        let probed = Probed::default();
        let mut probe = Probe(&probed);
        let (count, task) = task();
        let mut cx = Context::from_waker(&task);
        let gate = Gate::new();

        assert!(gate.poll(&mut cx, Pin::new(&mut probe)).is_pending());
        assert_eq!(probed.polls(), 1, "a new future is polled");
        for _ in 0..5 {
            assert!(gate.poll(&mut cx, Pin::new(&mut probe)).is_pending());
        }
        assert_eq!(probed.polls(), 1, "not polled before its waker fired");

        probed.ready.store(true, Ordering::SeqCst);
        probed.waker.lock().unwrap().take().unwrap().wake();
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "its waker wakes the task"
        );
        assert!(gate.poll(&mut cx, Pin::new(&mut probe)).is_ready());
        assert_eq!(probed.polls(), 2);
    }

    #[test]
    fn an_opened_gate_polls_a_new_future() {
        let probed = Probed::default();
        let (_, task) = task();
        let mut cx = Context::from_waker(&task);
        let gate = Gate::new();
        assert!(
            gate.poll(&mut cx, Pin::new(&mut Probe(&probed)))
                .is_pending()
        );
        let mut second = Probe(&probed);
        assert!(gate.poll(&mut cx, Pin::new(&mut second)).is_pending());
        assert_eq!(probed.polls(), 1);
        gate.open();
        assert!(gate.poll(&mut cx, Pin::new(&mut second)).is_pending());
        assert_eq!(probed.polls(), 2);
    }
}
