//! The bare-hop baseline: a byte relay on a Unix socket that spawns one fixture per connection.

use crate::LOAD_BUF;
use crate::daemon::temp_dir;
use crate::process::Proc;
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

/// A byte relay on a Unix socket: per connection it spawns a fixture and copies bytes both
/// ways without parsing. Runs on its own runtime and thread; dropping it stops the runtime,
/// which drops every connection and so stops and reaps every fixture.
pub struct Relay {
    pub socket: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Relay {
    pub fn start() -> Result<Relay, String> {
        let dir = temp_dir()?;
        let socket = dir.path().join("relay.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket)
            .map_err(|e| format!("relay: bind {}: {e}", socket.display()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("relay: {e}"))?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("bare-hop".into())
            .spawn(move || relay_thread(listener, stop_rx))
            .map_err(|e| format!("relay thread: {e}"))?;
        Ok(Relay {
            socket,
            stop: Some(stop_tx),
            thread: Some(thread),
            _dir: dir,
        })
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            eprintln!("warning: the relay thread panicked");
        }
    }
}

fn relay_thread(
    listener: std::os::unix::net::UnixListener,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("bare-hop")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("relay: cannot build its runtime: {e}");
            return;
        }
    };
    rt.block_on(async move {
        let listener = match UnixListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("relay: {e}");
                return;
            }
        };
        loop {
            tokio::select! {
                _ = &mut stop => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        tokio::spawn(relay_one(stream));
                    }
                    Err(e) => {
                        eprintln!("relay: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                },
            }
        }
    });
    // Drops every connection task, and with it every fixture (stopped and reaped).
    rt.shutdown_timeout(Duration::from_secs(5));
}

async fn relay_one(stream: UnixStream) {
    let mut proc = match Proc::fixture(&[]) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("relay: {e}");
            return;
        }
    };
    let (mut stdin, stdout) = match proc.take_pipes() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("relay: {e}");
            return;
        }
    };
    let (sock_r, mut sock_w) = stream.into_split();
    let up = async move {
        let mut from = BufReader::with_capacity(LOAD_BUF, sock_r);
        let _ = tokio::io::copy_buf(&mut from, &mut stdin).await;
        drop(stdin); // EOF tells the fixture to exit
    };
    let down = async move {
        let mut from = BufReader::with_capacity(LOAD_BUF, stdout);
        let _ = tokio::io::copy_buf(&mut from, &mut sock_w).await;
        let _ = sock_w.shutdown().await;
    };
    tokio::join!(up, down);
    // Reaping blocks briefly; keep it off the relay's workers.
    let _ = tokio::task::spawn_blocking(move || drop(proc)).await;
}
