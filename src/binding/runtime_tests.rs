use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

const BOUND: Duration = Duration::from_secs(5);

/// Started with `start_here`; its `Unstarted` kept.
fn start(work: impl Future<Output = ()> + Send + 'static) -> Unstarted {
    let mut kept = None;
    let started = start_here(work, |unstarted| kept = Some(unstarted));
    assert!(started.is_ok(), "no runtime");
    kept.expect("registered before its first poll")
}

/// Sets its flag when dropped: whether a task's future was dropped unrun.
struct Dropped(Arc<AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_task_done_in_its_first_poll_is_over_and_nothing_is_left_to_drop() {
    let (done, heard) = mpsc::channel();
    let unstarted = start(async move {
        let _ = done.send(std::thread::current().id());
    });
    assert_eq!(heard.recv_timeout(BOUND), Ok(std::thread::current().id()));
    assert!(!unstarted.drop_task());
}

#[test]
fn a_task_woken_during_its_first_poll_is_run_on_the_runtime() {
    // It wakes itself and waits: nothing else will wake it, so only the wake seen during the
    // first poll can move it to the runtime.
    let (done, heard) = mpsc::channel();
    let mut first = true;
    let unstarted = start(std::future::poll_fn(move |cx| {
        if std::mem::take(&mut first) {
            cx.waker().wake_by_ref();
            return std::task::Poll::Pending;
        }
        let _ = done.send(std::thread::current().id());
        std::task::Poll::Ready(())
    }));
    let ran_on = heard.recv_timeout(BOUND).expect("never run again");
    assert_ne!(ran_on, std::thread::current().id());
    assert!(!unstarted.drop_task());
}

#[test]
fn a_parked_task_is_moved_to_the_runtime_by_a_wake_from_another_thread() {
    let (wake, woken) = tokio::sync::oneshot::channel::<()>();
    let (done, heard) = mpsc::channel();
    let _unstarted = start(async move {
        let _ = woken.await;
        let _ = done.send(());
    });
    assert!(heard.recv_timeout(Duration::from_millis(50)).is_err());
    let sent = std::thread::spawn(move || wake.send(()).is_ok());
    assert!(sent.join().expect("waker thread"));
    assert_eq!(heard.recv_timeout(BOUND), Ok(()));
}

#[test]
fn a_parked_task_dropped_before_any_wake_never_runs() {
    let (wake, woken) = tokio::sync::oneshot::channel::<()>();
    let (done, heard) = mpsc::channel();
    let dropped = Arc::new(AtomicBool::new(false));
    let guard = Dropped(dropped.clone());
    let unstarted = start(async move {
        let _guard = guard;
        let _ = woken.await;
        let _ = done.send(());
    });
    assert!(unstarted.drop_task());
    assert!(dropped.load(Ordering::SeqCst));
    assert!(!unstarted.drop_task(), "dropped twice");
    let _ = wake.send(());
    assert!(heard.recv_timeout(Duration::from_millis(200)).is_err());
}

#[test]
fn a_timer_registered_in_the_first_poll_fires_on_the_runtime() {
    let (done, heard) = mpsc::channel();
    let _unstarted = start(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let _ = done.send(());
    });
    assert_eq!(heard.recv_timeout(BOUND), Ok(()));
}
