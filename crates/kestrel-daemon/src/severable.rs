//! A stream the daemon can cut: once its token is cancelled, reads see end-of-file and
//! writes fail. A client that stops reading is disconnected this way, even while the
//! connection's writer is blocked on a full socket buffer.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// `inner`, until `token` is cancelled.
pub(crate) struct Severable<T> {
    inner: T,
    cut: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<T> Severable<T> {
    pub(crate) fn new(inner: T, token: &CancellationToken) -> Self {
        Self { inner, cut: Box::pin(token.clone().cancelled_owned()) }
    }

    fn is_cut(&mut self, cx: &mut Context<'_>) -> bool {
        self.cut.as_mut().poll(cx).is_ready()
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Severable<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.is_cut(cx) {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Severable<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.is_cut(cx) {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.is_cut(cx) {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.is_cut(cx) {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_cut_stream_reads_eof_and_refuses_writes() {
        let (ours, _theirs) = tokio::io::duplex(8);
        let token = CancellationToken::new();
        let mut stream = Severable::new(ours, &token);
        token.cancel();
        let mut buffer = [0u8; 4];
        assert_eq!(stream.read(&mut buffer).await.unwrap(), 0);
        assert!(stream.write_all(b"x").await.is_err());
    }

    #[tokio::test]
    async fn a_blocked_write_fails_when_cut() {
        let (ours, _theirs) = tokio::io::duplex(4);
        let token = CancellationToken::new();
        let mut stream = Severable::new(ours, &token);
        let writer = tokio::spawn(async move { stream.write_all(&[0u8; 64]).await });
        tokio::task::yield_now().await;
        token.cancel();
        let result =
            tokio::time::timeout(std::time::Duration::from_secs(5), writer).await.unwrap().unwrap();
        assert!(result.is_err());
    }
}
