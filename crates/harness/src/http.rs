//! One plain HTTP/1.1 GET, for the endpoints `nodewarden run` and `sim
//! --serve` serve without TLS: `/metrics`, `/healthz`, `/readyz` and
//! `/shadow`.
//!
//! A harness reads these over loopback many times a second and a user
//! reads `/shadow` once; neither needs a client library, keep-alive or
//! TLS, so this is a request written on a socket and an answer read until
//! the server closes it (`Connection: close`). Every server it is used on
//! sends its answer whole (a `Content-Length`, not chunks).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long a GET may take. Each caller picks its own: a harness that
/// must kill a process at an instant cannot wait long for its metrics, one
/// that counts what a process said before it dies would rather wait.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// For the connection.
    pub connect: Duration,
    /// For each read of the answer.
    pub read: Duration,
}

/// An HTTP answer: what a caller decides on (the code) and reads (the
/// body); the headers are not kept, as no caller needs them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The status code (200, 404, ...).
    pub code: u16,
    /// The status line as sent (`HTTP/1.1 404 Not Found`), for an error
    /// message.
    pub status: String,
    /// Everything after the headers.
    pub body: String,
}

/// Why a GET got no answer: the step that failed, so an error message
/// says whether the server was not there or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// No connection within the time.
    #[error("connecting to {addr}: {source}")]
    Connect {
        /// Where.
        addr: SocketAddr,
        /// Why not.
        source: std::io::Error,
    },
    /// The request could not be written.
    #[error("sending the request: {0}")]
    Send(std::io::Error),
    /// The answer could not be read to its end (in time, or as text).
    #[error("reading the answer: {0}")]
    Read(std::io::Error),
    /// What came back has no status line and headers.
    #[error("not an HTTP answer")]
    NotHttp,
}

/// `GET path` from `addr`, with `host` as the `Host` header (the name the
/// caller was given, or the address): the status and the body, whatever
/// the code.
pub fn get(addr: SocketAddr, host: &str, path: &str, timeouts: Timeouts) -> Result<Answer, HttpError> {
    let mut s =
        TcpStream::connect_timeout(&addr, timeouts.connect).map_err(|source| HttpError::Connect { addr, source })?;
    s.set_read_timeout(Some(timeouts.read)).map_err(HttpError::Read)?;
    // One write: `nodewarden run` reads a request in one go.
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes())
        .map_err(HttpError::Send)?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).map_err(HttpError::Read)?;
    parse_answer(&answer).ok_or(HttpError::NotHttp)
}

/// The status line's code and the body of a whole answer.
fn parse_answer(answer: &str) -> Option<Answer> {
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let status = head.lines().next()?;
    let code = status.strip_prefix("HTTP/")?.split_whitespace().nth(1)?.parse().ok()?;
    Some(Answer { code, status: status.to_string(), body: body.to_string() })
}

/// The body of `GET /metrics` from `addr` (a Prometheus text page, read
/// with [`crate::prometheus`]); empty when it cannot be read in time or
/// the answer is not a 200, since a process being killed or stopped is an
/// ordinary moment for a harness, not an error.
pub fn scrape(addr: SocketAddr, timeouts: Timeouts) -> String {
    match get(addr, &addr.to_string(), "/metrics", timeouts) {
        Ok(a) if a.code == 200 => a.body,
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    const QUICK: Timeouts = Timeouts { connect: Duration::from_millis(50), read: Duration::from_millis(500) };

    /// Serves `answer` to one request on a new port; the request's text
    /// comes back from the thread.
    fn serve_once(answer: &'static str) -> (SocketAddr, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            let mut buf = [0u8; 1024];
            let n = s.read(&mut buf).expect("read");
            s.write_all(answer.as_bytes()).expect("write");
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        (addr, server)
    }

    #[test]
    fn an_answer_is_its_code_status_and_body_and_the_request_names_its_host() {
        let (addr, server) = serve_once("HTTP/1.1 404 Not Found\r\ncontent-length: 9\r\n\r\nnot found");
        let a = get(addr, "replica:10257", "/shadow", QUICK).expect("an answer");
        assert_eq!(a, Answer { code: 404, status: "HTTP/1.1 404 Not Found".into(), body: "not found".into() });
        let request = server.join().expect("server");
        assert!(request.starts_with("GET /shadow HTTP/1.1\r\nHost: replica:10257\r\n"), "{request}");
    }

    #[test]
    fn a_scrape_is_the_body_of_a_200_and_empty_otherwise() {
        let (addr, server) = serve_once("HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nup 1\nx 2\n");
        assert_eq!(scrape(addr, QUICK), "up 1\nx 2\n");
        server.join().expect("server");
        let (addr, server) = serve_once("HTTP/1.1 500 Internal Server Error\r\n\r\nup 1\n");
        assert_eq!(scrape(addr, QUICK), "");
        server.join().expect("server");
        let (addr, server) = serve_once("up 1\n");
        assert!(matches!(get(addr, "x", "/metrics", QUICK), Err(HttpError::NotHttp)));
        server.join().expect("server");
    }

    #[test]
    fn nothing_listening_is_a_connect_error_and_scrapes_empty() {
        let addr = crate::process::free_port().expect("a port");
        assert!(matches!(get(addr, "x", "/", QUICK), Err(HttpError::Connect { .. })));
        assert_eq!(scrape(addr, QUICK), "");
    }
}
