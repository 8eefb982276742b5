//! The child processes of a test harness: `nodewarden sim --serve` and
//! `nodewarden run` started as users start them, watched while a trial
//! runs, read over loopback, and never left behind.
//!
//! `cargo xtask wire`, `cargo xtask wire-load` and the chaos trials all do
//! this; one copy keeps their rules the same: a process's stderr goes to
//! its own log file (the tail of which is what a failure shows), its stdin
//! is closed, it is SIGKILLed and reaped when its handle is dropped (on an
//! error or a panic too), and a process that cannot be asked whether it
//! still runs counts as a failure rather than as running.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{ChildStdout, Command, ExitStatus, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

/// Why a process could not be started, or is no longer running: each
/// names the process, so a harness with several can pass it on as it is.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// Its log could not be created, or the program not started.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// It exited: its status and the end of its log, its last words.
    #[error("{what} exited ({status}); the end of {}:\n{tail}", log.display())]
    Exited {
        /// The process, as [`Proc::what`] names it.
        what: String,
        /// How it ended.
        status: ExitStatus,
        /// Its stderr's file.
        log: PathBuf,
        /// The last lines of it ([`tail`]).
        tail: String,
    },
    /// It cannot be asked whether it runs, which a harness treats as an
    /// exit: a process it cannot watch is no process it can trust.
    #[error("{what}: cannot tell whether it runs: {source}")]
    Unknown {
        /// The process.
        what: String,
        /// Why it could not be asked.
        source: std::io::Error,
    },
}

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
    pub fn spawn(mut cmd: Command, what: impl Into<String>, log: PathBuf) -> Result<Proc, ProcessError> {
        let what = what.into();
        let file = std::fs::File::create(&log)
            .map_err(|source| ProcessError::Io { what: format!("creating {}", log.display()), source })?;
        cmd.stdin(Stdio::null()).stderr(file);
        let spawned_unix_nanos = unix_nanos();
        let child = cmd.spawn().map_err(|source| ProcessError::Io {
            what: format!("starting {}", Path::new(cmd.get_program()).display()),
            source,
        })?;
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
    pub fn check(&mut self) -> Result<(), ProcessError> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(ProcessError::Exited {
                what: self.what.clone(),
                status,
                log: self.log.clone(),
                tail: tail(&self.log),
            }),
            Ok(None) => Ok(()),
            Err(source) => Err(ProcessError::Unknown { what: self.what.clone(), source }),
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

/// The Unix time now, in nanoseconds (0 before 1970, the maximum after
/// 2262).
pub fn unix_nanos() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("nodewarden-harness-process-{}", std::process::id()));
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
        let deadline = Instant::now() + Duration::from_secs(10);
        let err = loop {
            match p.check() {
                Err(e) => break e.to_string(),
                Ok(()) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
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
}
