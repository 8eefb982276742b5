//! The child processes of a test harness: `nodewarden sim --serve` and
//! `nodewarden run` started as users start them, watched while a trial
//! runs, read over loopback, and never left behind.
//!
//! `cargo xtask wire` ([`crate::play`]), `cargo xtask wire-load` and the
//! chaos trials all do this; one copy keeps their rules the same: a
//! process's stderr goes to its own log file (the tail of which is what a
//! failure shows), its stdin is closed, it is SIGKILLed and reaped when
//! its handle is dropped (on an error or a panic too), and a process that
//! cannot be asked whether it still runs counts as a failure rather than
//! as running.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{ChildStdout, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::WireError;

/// Lines of a log that a failure shows: enough for a panic's message or
/// the last few requests, short enough to read in a CI log.
const TAIL_LINES: usize = 12;

/// A started child process, SIGKILLed and reaped when dropped, so that a
/// harness that fails half-way leaves no server or controller running.
pub struct Proc {
    child: std::process::Child,
    what: String,
    log: PathBuf,
    spawned_unix_nanos: i64,
}

impl Proc {
    /// Starts `cmd` with its stdin closed and its stderr written to a new
    /// file at `log` (stdout is left as `cmd` says: a harness that reads
    /// what the process prints pipes it, one that does not sends it to
    /// `Stdio::null()`). `what` names the process in every error.
    pub fn spawn(mut cmd: Command, what: impl Into<String>, log: PathBuf) -> Result<Proc, WireError> {
        let what = what.into();
        let file = std::fs::File::create(&log).map_err(|e| WireError::io(format!("creating {}", log.display()), e))?;
        cmd.stdin(Stdio::null()).stderr(file);
        let spawned_unix_nanos = unix_nanos();
        let child = cmd
            .spawn()
            .map_err(|e| WireError::io(format!("starting {}", Path::new(cmd.get_program()).display()), e))?;
        Ok(Proc { child, what, log, spawned_unix_nanos })
    }

    /// The name errors give it.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// Its stderr's file, for a harness that waits for a line in it.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// When it was started, Unix nanoseconds: what a harness measures a
    /// process's start-up from.
    pub fn spawned_unix_nanos(&self) -> i64 {
        self.spawned_unix_nanos
    }

    /// Its process id, for reading `/proc` or sending a signal.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its stdout, when `cmd` piped it and no one took it yet; dropping
    /// the handle closes the pipe.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// An error naming the process and the end of its log once it has
    /// exited (or cannot be asked), so a harness that checks between
    /// steps stops at the first process that died, with its last words.
    pub fn check(&mut self) -> Result<(), WireError> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(WireError::Process(format!(
                "{} exited ({status}); the end of {}:\n{}",
                self.what,
                self.log.display(),
                tail(&self.log)
            ))),
            Ok(None) => Ok(()),
            Err(e) => Err(WireError::Process(format!("{}: cannot tell whether it runs: {e}", self.what))),
        }
    }

    /// SIGKILL, then reap: a crash, as a trial's restart means it, and
    /// no zombie left. Killing one already gone does nothing.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last lines of a log (an unreadable log reads as empty): what an
/// error about a process shows of why it ended.
pub fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
}

/// A loopback address no one listens on now, for a process's
/// `--bind-address`: the harnesses run several at once, so no port is
/// fixed. (Another process may take it before the child binds it; on
/// loopback, in a test, that has not been seen to happen.)
pub fn free_port() -> std::io::Result<SocketAddr> {
    TcpListener::bind("127.0.0.1:0")?.local_addr()
}

/// How long a [`scrape`] may take. Each harness picks its own: one that
/// must kill a process at an instant cannot wait long for its metrics,
/// one that counts what a process said before it dies would rather wait.
#[derive(Clone, Copy, Debug)]
pub struct ScrapeTimeouts {
    /// For the connection.
    pub connect: Duration,
    /// For each read of the answer.
    pub read: Duration,
}

/// `GET /metrics` over plain HTTP/1.1, the whole answer (headers too) as
/// text; empty when it cannot be read in time, since a process being
/// killed or stopped is an ordinary moment for a harness, not an error.
pub fn scrape(addr: SocketAddr, timeouts: ScrapeTimeouts) -> String {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, timeouts.connect) else { return String::new() };
    let _ = s.set_read_timeout(Some(timeouts.read));
    if s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).is_err() {
        return String::new();
    }
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body
}

/// The Unix time now, in nanoseconds (0 before 1970, the maximum after
/// 2262).
pub fn unix_nanos() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("nodewarden-wire-process-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }

    /// A process that exits is reported with the end of its log; one that
    /// runs is killed (and reaped) when its handle goes.
    #[test]
    fn an_exit_names_the_process_and_its_log_and_a_drop_kills() {
        let log = dir().join("exits.log");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "for i in $(seq 1 20); do echo line $i >&2; done; exit 3"]).stdout(Stdio::null());
        let mut p = Proc::spawn(cmd, "the shell", log.clone()).expect("spawn");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let err = loop {
            match p.check() {
                Err(e) => break e.to_string(),
                Ok(()) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                Ok(()) => panic!("sh did not exit"),
            }
        };
        assert!(err.starts_with("the shell exited (exit status: 3); the end of "), "{err}");
        assert!(err.ends_with("line 9\nline 10\nline 11\nline 12\nline 13\nline 14\nline 15\nline 16\nline 17\nline 18\nline 19\nline 20"), "{err}");
        assert!(!err.contains("line 8\n"), "{err}");

        let mut cmd = Command::new("sleep");
        cmd.arg("600").stdout(Stdio::null());
        let p = Proc::spawn(cmd, "sleep", dir().join("sleep.log")).expect("spawn");
        let pid = p.id();
        drop(p);
        // Reaped: no such process any more, not even a zombie.
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
    }

    #[test]
    fn nothing_listening_scrapes_empty() {
        let addr = free_port().expect("a port");
        let t = ScrapeTimeouts { connect: Duration::from_millis(50), read: Duration::from_millis(100) };
        assert_eq!(scrape(addr, t), "");
    }
}
