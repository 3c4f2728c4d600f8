//! Relay: the server's front door, a TCP relay on 127.0.0.1 that can be frozen, to stand for a
//! server stopped with `kill -STOP`: connections are still taken (by the kernel's backlog) but
//! nothing is read, written or answered, not even HTTP/2 pings.
//!
//! It knows bytes and sockets; it does not know gRPC.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How often a frozen relay looks whether it thawed.
const POLL: Duration = Duration::from_millis(20);

/// Relays every connection `front` takes to `back`, while `frozen` is false.
pub(super) async fn run(front: TcpListener, back: std::net::SocketAddr, frozen: Arc<AtomicBool>) {
    loop {
        while frozen.load(Ordering::SeqCst) {
            tokio::time::sleep(POLL).await;
        }
        let Ok((client, _)) = front.accept().await else {
            return;
        };
        let Ok(server) = TcpStream::connect(back).await else {
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let (cr, cw) = client.into_split();
        let (sr, sw) = server.into_split();
        tokio::spawn(pipe(cr, sw, frozen.clone()));
        tokio::spawn(pipe(sr, cw, frozen.clone()));
    }
}

/// Copies `from` to `to`, holding everything while frozen; ends with either side.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        while frozen.load(Ordering::SeqCst) {
            tokio::time::sleep(POLL).await;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        while frozen.load(Ordering::SeqCst) {
            tokio::time::sleep(POLL).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
