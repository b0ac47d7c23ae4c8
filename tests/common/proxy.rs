//! A loopback TCP proxy between a Redis client and a `redis-server` that injects
//! network faults: delay, blackhole (a partition) and connection resets.
//!
//! Every accepted connection gets its own upstream connection; bytes are forwarded in
//! chunks as they are read. [`Proxy::set`] changes the [`Fault`] for existing and new
//! connections at once.
//!
//! # Blackhole
//!
//! While the fault is [`Fault::Blackhole`], nothing flows either way: bytes read from
//! either side are dropped (so are bytes read earlier but not yet written), and both
//! sockets stay open, so the client sees a hang rather than an error. New connections
//! are accepted and treated the same.
//!
//! Dropping bytes in the middle of a RESP stream would leave the two ends out of step,
//! so a connection that lived through a blackhole is never resumed: when the fault
//! changes from `Blackhole` to anything else, every connection the proxy is carrying is
//! reset, exactly as by [`Proxy::reset_all`]. Clients must reconnect; connections made
//! after the change are forwarded normally.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::RngExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What the proxy does to the bytes it carries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Forward bytes both ways.
    Pass,
    /// Forward, holding each chunk in each direction for `base` plus a uniform random
    /// `0..=jitter`; bytes keep their order within a direction.
    Delay { base: Duration, jitter: Duration },
    /// Forward nothing, keep sockets open; see the [module docs](self).
    Blackhole,
}

impl Fault {
    /// How long to hold a chunk read now.
    fn hold(self) -> Duration {
        match self {
            Fault::Delay { base, jitter } => {
                base + rand::rng().random_range(Duration::ZERO..=jitter)
            }
            Fault::Pass | Fault::Blackhole => Duration::ZERO,
        }
    }
}

/// A running proxy on 127.0.0.1; dropping it stops accepting and closes every
/// connection.
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
}

/// State shared by the proxy handle, the accept loop and the connection tasks.
#[derive(Debug)]
struct Shared {
    upstream: u16,
    fault: watch::Sender<Fault>,
    /// Cancelled when the proxy is dropped; parent of every `epoch`.
    shutdown: CancellationToken,
    /// Handed to each new connection; cancelled (and replaced) to reset them all.
    epoch: Mutex<CancellationToken>,
    /// Client connections accepted and not yet closed.
    open: AtomicUsize,
}

impl Proxy {
    /// Listens on 127.0.0.1 on a free port, forwarding to 127.0.0.1:`upstream_port`,
    /// with [`Fault::Pass`].
    pub async fn start(upstream_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port for the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let shutdown = CancellationToken::new();
        let shared = Arc::new(Shared {
            upstream: upstream_port,
            fault: watch::Sender::new(Fault::Pass),
            epoch: Mutex::new(shutdown.child_token()),
            shutdown,
            open: AtomicUsize::new(0),
        });
        tokio::spawn(accept_loop(listener, shared.clone()));
        Proxy { port, shared }
    }

    /// The port the proxy listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Applies `fault` to existing and new connections at once. Leaving
    /// [`Fault::Blackhole`] resets every current connection (see the module docs).
    pub fn set(&self, fault: Fault) {
        let mut epoch = self.shared.epoch.lock().expect("epoch lock");
        if *self.shared.fault.borrow() == Fault::Blackhole && fault != Fault::Blackhole {
            self.shared.reset(&mut epoch);
        }
        // After the reset: a writer that sees the new fault also sees its epoch cancelled.
        self.shared.fault.send_replace(fault);
    }

    /// The current fault.
    pub fn fault(&self) -> Fault {
        *self.shared.fault.borrow()
    }

    /// Closes every current connection: the client side with a TCP RST, the upstream
    /// side normally. Nothing more is forwarded on them from the moment this returns;
    /// new connections are still accepted.
    pub fn reset_all(&self) {
        let mut epoch = self.shared.epoch.lock().expect("epoch lock");
        self.shared.reset(&mut epoch);
    }

    /// Client connections currently open (accepted and not yet closed by either end).
    pub fn connections(&self) -> usize {
        self.shared.open.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

impl Shared {
    /// Cancels the current epoch, resetting its connections, and starts a new one.
    fn reset(&self, epoch: &mut CancellationToken) {
        std::mem::replace(epoch, self.shutdown.child_token()).cancel();
    }
}

/// Accepts clients until the proxy is dropped, one task per connection.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let accepted = tokio::select! {
            () = shared.shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((client, _)) = accepted else {
            // e.g. out of file descriptors: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let epoch = shared.epoch.lock().expect("epoch lock").clone();
        let open = Open::count(&shared);
        tokio::spawn(connection(client, shared.clone(), epoch, open));
    }
}

/// Counts a client connection as open for as long as it lives.
struct Open(Arc<Shared>);

impl Open {
    fn count(shared: &Arc<Shared>) -> Self {
        shared.open.fetch_add(1, Ordering::SeqCst);
        Open(shared.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Carries one client connection until either end closes it or its epoch is
/// cancelled; in the latter case the client gets a RST.
async fn connection(
    mut client: TcpStream,
    shared: Arc<Shared>,
    epoch: CancellationToken,
    _open: Open,
) {
    let reset = tokio::select! {
        () = epoch.cancelled() => true,
        () = carry(&mut client, &shared, &epoch) => false,
    };
    if reset {
        // Zero linger makes close send RST without blocking; `set_zero_linger` replaces
        // this call from tokio 1.50 on.
        #[allow(deprecated)]
        let _ = client.set_linger(Some(Duration::ZERO));
    }
}

/// Connects upstream and forwards both ways until either direction ends.
async fn carry(client: &mut TcpStream, shared: &Shared, epoch: &CancellationToken) {
    let Ok(mut upstream) = TcpStream::connect(("127.0.0.1", shared.upstream)).await else {
        return;
    };
    let (client_read, client_write) = client.split();
    let (upstream_read, upstream_write) = upstream.split();
    tokio::select! {
        _ = pump(client_read, upstream_write, shared, epoch) => {}
        _ = pump(upstream_read, client_write, shared, epoch) => {}
    }
}

/// Forwards one direction: a reader stamps each chunk with its release time and queues
/// it; one writer sends the chunks in queue order, each no earlier than its release
/// time, so order holds whatever the jitter. Ends on end of stream (after the queue
/// drains) or on an error.
async fn pump(
    mut from: ReadHalf<'_>,
    mut to: WriteHalf<'_>,
    shared: &Shared,
    epoch: &CancellationToken,
) -> io::Result<()> {
    let (queue, mut queued) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let read = async move {
        let mut buf = vec![0; 16 * 1024];
        loop {
            let n = from.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            let fault = *shared.fault.borrow();
            if fault == Fault::Blackhole {
                continue;
            }
            let release_at = Instant::now() + fault.hold();
            if queue.send((release_at, buf[..n].to_vec())).is_err() {
                return Ok(());
            }
        }
    };
    let write = async move {
        let mut fault = shared.fault.subscribe();
        while let Some((release_at, bytes)) = queued.recv().await {
            tokio::time::sleep_until(release_at).await;
            if *fault.borrow_and_update() == Fault::Blackhole {
                continue;
            }
            if epoch.is_cancelled() {
                return Ok(());
            }
            tokio::select! {
                written = to.write_all(&bytes) => written?,
                // A blackhole also stops a write the peer is slow to take.
                _ = fault.wait_for(|fault| *fault == Fault::Blackhole) => {}
            }
        }
        Ok(())
    };
    tokio::try_join!(read, write).map(|_| ())
}
