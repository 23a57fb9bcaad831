//! A loopback HTTP/1.1 file server for the remote tests and the remote
//! benchmark: 127.0.0.1 only, one thread per connection, stopped when
//! dropped (and by itself after ten minutes). It serves files from memory
//! (or a header followed by zeros, for large files) with `Range`/206,
//! ETags and conditional requests, redirects, required tokens, and the
//! faults a remote reader must survive. Every request and every body byte
//! sent is counted. [`without_paths`] compares a remote run's JSON with a
//! local one's.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A file's bytes: all in memory, or a head followed by zeros.
#[derive(Clone)]
pub enum Body {
    Bytes(Arc<Vec<u8>>),
    Zeros { head: Arc<Vec<u8>>, len: u64 },
}

impl Body {
    pub fn len(&self) -> u64 {
        match self {
            Body::Bytes(b) => b.len() as u64,
            Body::Zeros { len, .. } => *len,
        }
    }

    fn write_range(
        &self,
        out: &mut dyn std::io::Write,
        start: u64,
        end: u64,
    ) -> std::io::Result<()> {
        match self {
            Body::Bytes(b) => out.write_all(&b[start as usize..end as usize]),
            Body::Zeros { head, .. } => {
                let mut at = start;
                let zeros = vec![0u8; 1 << 16];
                while at < end {
                    if at < head.len() as u64 {
                        let stop = end.min(head.len() as u64);
                        out.write_all(&head[at as usize..stop as usize])?;
                        at = stop;
                    } else {
                        let n = (end - at).min(zeros.len() as u64) as usize;
                        out.write_all(&zeros[..n])?;
                        at += n as u64;
                    }
                }
                Ok(())
            }
        }
    }
}

/// What a path answers.
#[derive(Clone)]
pub enum Route {
    File {
        body: Body,
        etag: String,
    },
    /// A redirect (302) to this URL (absolute or a path).
    Redirect(String),
    /// This status, with an empty body (and `Retry-After: 7` for 429).
    Status(u16),
}

/// A fault applied to file responses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    /// `Range` is ignored: 200 and the whole file.
    NoRange,
    /// The connection is closed halfway through the body.
    DropMidBody,
    /// The body is shorter than its `Content-Length`.
    ShortBody,
    /// The response waits this many milliseconds before its headers.
    Slow(u64),
    /// After this many file responses, the ETag changes.
    ChangeEtagAfter(u64),
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Logged {
    pub path: String,
    pub range: Option<String>,
    pub authorization: Option<String>,
    pub status: u16,
}

#[derive(Default)]
struct State {
    routes: Mutex<HashMap<String, Route>>,
    /// Paths that answer 401 unless `Authorization: Bearer TOKEN` is sent.
    tokens: Mutex<HashMap<String, String>>,
    fault: Mutex<Option<Fault>>,
    log: Mutex<Vec<Logged>>,
    body_bytes: AtomicU64,
    file_responses: AtomicU64,
}

/// The running server.
pub struct Server {
    port: u16,
    state: Arc<State>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(State::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (Arc::clone(&state), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("test-http".into())
            .spawn(move || {
                let started = Instant::now();
                while !st.load(Ordering::Relaxed) && started.elapsed() < Duration::from_mins(10) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let (s, st) = (Arc::clone(&s), Arc::clone(&st));
                            let _ = std::thread::Builder::new()
                                .name("test-http-conn".into())
                                .spawn(move || serve(stream, &s, &st));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(2)),
                    }
                }
            })
            .expect("spawn server");
        Self {
            port,
            state,
            stop,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn origin(&self) -> String {
        self.url("")
    }

    pub fn file(&self, path: &str, bytes: Vec<u8>) {
        self.route(
            path,
            Route::File {
                body: Body::Bytes(Arc::new(bytes)),
                etag: format!("\"v1-{path}\""),
            },
        );
    }

    pub fn route(&self, path: &str, route: Route) {
        self.state
            .routes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(path.to_owned(), route);
    }

    /// `path` answers 401 unless this token is sent.
    pub fn require_token(&self, path: &str, token: &str) {
        self.state
            .tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(path.to_owned(), token.to_owned());
    }

    pub fn fault(&self, fault: Fault) {
        *self
            .state
            .fault
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(fault);
        self.state.file_responses.store(0, Ordering::Relaxed);
    }

    /// Body bytes sent so far.
    pub fn body_bytes(&self) -> u64 {
        self.state.body_bytes.load(Ordering::Relaxed)
    }

    pub fn log(&self) -> Vec<Logged> {
        self.state
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub fn reset_counts(&self) {
        self.state.body_bytes.store(0, Ordering::Relaxed);
        self.state
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Request {
    path: String,
    headers: HashMap<String, String>,
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let _method = parts.next()?;
    let path = parts.next()?.to_owned();
    let mut headers = HashMap::new();
    let mut total = 0;
    loop {
        let mut h = String::new();
        let n = reader.read_line(&mut h).ok()?;
        total += n;
        if n == 0 || total > 64 * 1024 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    Some(Request { path, headers })
}

fn serve(stream: TcpStream, state: &State, stop: &AtomicBool) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut out = std::io::BufWriter::with_capacity(1 << 16, write_half);
    while !stop.load(Ordering::Relaxed) {
        let Some(req) = read_request(&mut reader) else {
            return;
        };
        let close = req
            .headers
            .get("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"));
        match respond(&req, state, &mut out) {
            Ok(true) if !close => {}
            _ => {
                let _ = out.flush();
                return;
            }
        }
        if out.flush().is_err() {
            return;
        }
    }
}

/// Answers one request; `Ok(false)` closes the connection.
fn respond(req: &Request, state: &State, out: &mut dyn std::io::Write) -> std::io::Result<bool> {
    let path = req.path.split('?').next().unwrap_or("").to_owned();
    let route = state
        .routes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&path)
        .cloned();
    let auth = req.headers.get("authorization").cloned();
    let log = |status: u16| {
        state
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Logged {
                path: path.clone(),
                range: req.headers.get("range").cloned(),
                authorization: auth.clone(),
                status,
            });
    };
    let needed = state
        .tokens
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&path)
        .cloned();
    if let Some(token) = needed
        && auth.as_deref() != Some(format!("Bearer {token}").as_str())
    {
        log(401);
        write!(
            out,
            "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"
        )?;
        return Ok(true);
    }
    let Some(route) = route else {
        log(404);
        write!(out, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?;
        return Ok(true);
    };
    let (body, etag) = match route {
        Route::Redirect(to) => {
            log(302);
            write!(
                out,
                "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n"
            )?;
            return Ok(true);
        }
        Route::Status(code) => {
            log(code);
            let extra = if code == 429 {
                "Retry-After: 7\r\n"
            } else {
                ""
            };
            write!(
                out,
                "HTTP/1.1 {code} Status\r\n{extra}Content-Length: 0\r\n\r\n"
            )?;
            return Ok(true);
        }
        Route::File { body, etag } => (body, etag),
    };
    let fault = state
        .fault
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .unwrap_or(Fault::None);
    let served = state.file_responses.fetch_add(1, Ordering::Relaxed);
    let etag = match fault {
        Fault::ChangeEtagAfter(n) if served >= n => format!("{etag}-changed"),
        _ => etag,
    };
    if let Fault::Slow(ms) = fault {
        std::thread::sleep(Duration::from_millis(ms));
    }
    let len = body.len();
    if req.headers.get("if-none-match") == Some(&etag) {
        log(304);
        write!(
            out,
            "HTTP/1.1 304 Not Modified\r\nETag: {etag}\r\nContent-Length: 0\r\n\r\n"
        )?;
        return Ok(true);
    }
    let range = req
        .headers
        .get("range")
        .filter(|_| fault != Fault::NoRange)
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split_once('-'))
        .and_then(|(a, b)| {
            let a: u64 = a.parse().ok()?;
            let b: u64 = if b.is_empty() {
                len.saturating_sub(1)
            } else {
                b.parse().ok()?
            };
            Some((a, b.min(len.saturating_sub(1))))
        });
    let (status, start, end) = match range {
        Some((a, _)) if a >= len => {
            log(416);
            write!(
                out,
                "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{len}\r\nContent-Length: 0\r\n\r\n"
            )?;
            return Ok(true);
        }
        Some((a, b)) if a <= b => (206, a, b + 1),
        _ => (200, 0, len),
    };
    log(status);
    let n = end - start;
    if status == 206 {
        write!(
            out,
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {start}-{}/{len}\r\nContent-Length: {n}\r\nETag: {etag}\r\nAccept-Ranges: bytes\r\n\r\n",
            end - 1
        )?;
    } else {
        write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nETag: {etag}\r\n\r\n"
        )?;
    }
    let send = match fault {
        Fault::DropMidBody | Fault::ShortBody => n / 2,
        _ => n,
    };
    let mut counting = Counting {
        out,
        sent: &state.body_bytes,
    };
    body.write_range(&mut counting, start, start + send)?;
    if send < n {
        out.flush()?;
        return Ok(false);
    }
    Ok(true)
}

struct Counting<'a> {
    out: &'a mut dyn std::io::Write,
    sent: &'a AtomicU64,
}

impl std::io::Write for Counting<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.sent.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// A JSON document without the fields that name where it came from (a
/// path, a URL), to compare a remote run with a local one.
pub fn without_paths(mut v: serde_json::Value) -> serde_json::Value {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                for k in ["path", "a", "b", "config_path", "file"] {
                    if m.get(k).is_some_and(serde_json::Value::is_string) {
                        m.remove(k);
                    }
                }
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}
