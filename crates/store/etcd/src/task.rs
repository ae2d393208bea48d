//! A spawned task that stops when its handle is dropped.

use tokio::task::JoinHandle;

#[derive(Debug)]
pub(crate) struct Task<T = ()>(pub(crate) JoinHandle<T>);

impl<T: Send + 'static> Task<T> {
    pub(crate) fn spawn(future: impl Future<Output = T> + Send + 'static) -> Self {
        Task(tokio::spawn(future))
    }
}

impl<T> Drop for Task<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
