//! A server's life: binding its listeners, serving until told to stop (or
//! a signal, or an abandoned store), then closing the store.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::forwarding::{CommandRunner, SOCKET_FILE};
use super::mcp;
use super::routes::router;
use super::scheduling::Shared;
use super::served::Served;
use crate::error::{Error, Result};
use crate::progress::CancelToken;

/// How [`run`] serves.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The TCP address (port 0: any free port). Beyond loopback only with
    /// a `token`.
    pub listen: SocketAddr,
    /// A bearer token every request must present (`Authorization: Bearer
    /// …`), compared in constant time.
    pub token: Option<String>,
    /// Also listen on the store's [`SOCKET_FILE`].
    pub unix_socket: bool,
    /// The largest request body accepted (413 above it).
    pub max_body_bytes: usize,
    /// How long a request may run before the answer is "busy" (the work
    /// itself finishes in the background); also how long a stopping server
    /// waits for open requests before it drops their connections.
    pub request_timeout: Duration,
    /// Writes that may wait behind the running one; more are refused as
    /// busy at once.
    pub write_queue: usize,
    /// Stop on SIGINT and SIGTERM too (the CLI sets it).
    pub stop_on_signals: bool,
    /// What runs forwarded command lines (`POST /v1/cli`); without it that
    /// route answers 404.
    pub commands: Option<Arc<dyn CommandRunner>>,
    /// What `/mcp` (the store as an MCP server over streamable HTTP) lets
    /// a model do; without it that route answers 404.
    pub mcp: Option<mcp::McpOptions>,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            unix_socket: true,
            max_body_bytes: 16 << 20,
            request_timeout: Duration::from_secs(60),
            write_queue: 64,
            stop_on_signals: false,
            commands: None,
            mcp: Some(mcp::McpOptions::default()),
        }
    }
}

/// Where a started server listens (given to [`run`]'s `ready`).
#[derive(Debug, Clone)]
pub struct Bound {
    /// The TCP address, with the port chosen when 0 was asked for.
    pub address: SocketAddr,
    /// The Unix socket, when one was asked for.
    pub socket: Option<PathBuf>,
}

/// Serves `db` (a store or a shard set) until `shutdown` is cancelled (or a signal arrives, see
/// [`ServeOptions::stop_on_signals`]), then closes it. `ready` is called
/// once the listeners are bound. Fails when an address cannot be bound or
/// a non-loopback address has no token.
pub fn run(
    db: Served,
    options: &ServeOptions,
    ready: impl FnOnce(&Bound),
    shutdown: &CancelToken,
) -> Result<()> {
    if !options.listen.ip().is_loopback() && options.token.is_none() {
        return Err(Error::Usage(format!(
            "serving on {} (beyond loopback) needs a bearer token (--token-env VAR)",
            options.listen
        )));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Serve(format!("starting the runtime: {e}")))?;
    let socket_path = db.path().join(SOCKET_FILE);
    let shared = Arc::new(Shared {
        token: options.token.clone(),
        commands: options.commands.clone(),
        ..Shared::new(
            db,
            options.request_timeout,
            options.max_body_bytes,
            options.write_queue,
        )?
    });
    let result = runtime.block_on(serve(
        Arc::clone(&shared),
        options,
        socket_path.clone(),
        ready,
        shutdown,
    ));
    // Work still running (a request past its timeout, an ingest job, asked
    // to stop) ends before the store closes.
    shared.jobs.cancel_all();
    drop(runtime);
    shared.reads.wait_idle();
    if options.unix_socket {
        let _ = std::fs::remove_file(&socket_path);
    }
    result?;
    match shared.abandoned.get() {
        Some(cause) => Err(Error::Serve(format!(
            "this process cannot use the store again (it failed in its file system, or could not be opened again after a vacuum), so the server stopped: {cause}"
        ))),
        None => Ok(()),
    }
}

async fn serve(
    shared: Arc<Shared>,
    options: &ServeOptions,
    socket_path: PathBuf,
    ready: impl FnOnce(&Bound),
    shutdown: &CancelToken,
) -> Result<()> {
    let bind_error = |what: String| move |e: std::io::Error| Error::Serve(format!("{what}: {e}"));
    let tcp = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(bind_error(format!("listening on {}", options.listen)))?;
    let address = tcp
        .local_addr()
        .map_err(bind_error("the bound address".into()))?;
    let unix = if options.unix_socket {
        // The store's lock is held here, so a socket file left behind can
        // only be a dead server's.
        let _ = std::fs::remove_file(&socket_path);
        Some(
            tokio::net::UnixListener::bind(&socket_path).map_err(bind_error(format!(
                "listening on {}",
                socket_path.display()
            )))?,
        )
    } else {
        None
    };
    // One MCP service for both listeners, so a session opened on one is
    // known on the other; its streams end when the server stops.
    let mcp_stop = tokio_util::sync::CancellationToken::new();
    let mcp = options.mcp.clone().map(|mcp_options| {
        mcp::http_service(
            shared.store.clone(),
            mcp_options,
            options.token.is_some(),
            options.max_body_bytes,
            &mcp_stop,
        )
    });
    let app = router(
        Arc::clone(&shared),
        options.max_body_bytes,
        false,
        mcp.clone(),
    );
    // Listening before saying so: a signal sent as soon as the server is
    // ready must stop it, not kill it.
    let signals = options.stop_on_signals.then(StopSignals::listen).flatten();
    ready(&Bound {
        address,
        socket: unix.as_ref().map(|_| socket_path.clone()),
    });
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let watcher = tokio::spawn(wait_for_stop(
        shutdown.clone(),
        Arc::clone(&shared),
        signals,
        stop,
    ));
    let until_stopped = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|&s| s).await;
    };
    // Answers are small: send each at once rather than wait for an ACK.
    let tcp = axum::serve::ListenerExt::tap_io(tcp, |stream| {
        let _ = stream.set_nodelay(true);
    });
    // Once stopping, requests already running get the request timeout to
    // be answered; connections still open after it (a client that stopped
    // in the middle of a request) are dropped rather than awaited. Work on
    // the store that was started still finishes before it closes.
    let grace = options.request_timeout;
    let cut_off = {
        let stopped = stopped.clone();
        async move {
            until_stopped(stopped).await;
            tokio::time::sleep(grace).await;
        }
    };
    let ending_streams = tokio::spawn({
        let stopped = stopped.clone();
        async move {
            until_stopped(stopped).await;
            mcp_stop.cancel();
        }
    });
    let over_tcp =
        axum::serve(tcp, app.clone()).with_graceful_shutdown(until_stopped(stopped.clone()));
    let served = async {
        match unix {
            Some(unix) => {
                // Forwarded command lines read the server's files, so only
                // local processes (the socket's file permissions) may send
                // them.
                let local = router(shared, options.max_body_bytes, true, mcp);
                let over_unix =
                    axum::serve(unix, local).with_graceful_shutdown(until_stopped(stopped));
                tokio::try_join!(over_tcp.into_future(), over_unix.into_future()).map(drop)
            }
            None => over_tcp.await,
        }
    };
    let served = tokio::select! {
        served = served => served,
        () = cut_off => Ok(()),
    };
    watcher.abort();
    ending_streams.abort();
    served.map_err(|e| Error::Serve(format!("serving: {e}")))
}

/// SIGTERM and SIGINT, caught from the moment they are listened for.
struct StopSignals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Catches both signals from now on (within the runtime); `None` when
    /// they cannot be caught, as the server then stops only when told.
    fn listen() -> Option<StopSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Some(StopSignals {
            terminate: signal(SignalKind::terminate()).ok()?,
            interrupt: signal(SignalKind::interrupt()).ok()?,
        })
    }
}

/// Resolves `stop` once `shutdown` is cancelled, the store was abandoned
/// or, with `signals`, on SIGINT or SIGTERM.
async fn wait_for_stop(
    shutdown: CancelToken,
    shared: Arc<Shared>,
    signals: Option<StopSignals>,
    stop: tokio::sync::watch::Sender<bool>,
) {
    let cancelled = async {
        while !shutdown.is_cancelled() && shared.abandoned.get().is_none() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let signalled = async {
        let Some(mut signals) = signals else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = signals.terminate.recv() => {}
            _ = signals.interrupt.recv() => {}
        }
    };
    tokio::select! {
        () = cancelled => {}
        () = signalled => {}
    }
    let _ = stop.send(true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_whose_store_was_abandoned_stops_with_its_error() {
        use std::io::{Read, Write};
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::create(dir.path().join("db")).unwrap();
        db.abandon();
        let options = ServeOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            unix_socket: false,
            ..Default::default()
        };
        let (ready, bound) = std::sync::mpsc::channel();
        let server = std::thread::spawn(move || {
            run(
                Served::Store(Box::new(db)),
                &options,
                |b| ready.send(b.address).unwrap(),
                &CancelToken::new(),
            )
        });
        let address = bound.recv().unwrap();
        // The first request that reaches the store fails, as every later
        // one would, and the server stops by itself.
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        stream
            .write_all(b"GET /v1/docs HTTP/1.1\r\nHost: edudb\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 500"), "{answer}");
        let (ended, end) = std::sync::mpsc::channel();
        std::thread::spawn(move || ended.send(server.join().unwrap()).unwrap());
        let stopped = end
            .recv_timeout(Duration::from_secs(30))
            .expect("the server did not stop by itself");
        let err = stopped.unwrap_err();
        assert!(err.to_string().contains("the server stopped"), "{err}");
    }
}
