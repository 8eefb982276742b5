//! The processes wire-load measures: the served cluster and the `run`
//! replicas (started through `nodewarden_harness::process`, killed when
//! dropped), and the reading of their JSON logs for the moments the
//! timeline waits for.

use std::io::{Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nodewarden_harness::process::{self, Proc, free_port};
use nodewarden_objects::parse_rfc3339;
use serde_json::Value;

use super::options::Options;

/// Starts `binary args` with `env`, its stdout piped (the caller reads or
/// drops it), its stderr in `log`.
pub(super) fn spawn(binary: &Path, args: &[String], what: &str, log: PathBuf, env: &[(&str, &str)]) -> Result<Proc> {
    let mut cmd = Command::new(binary);
    cmd.args(args).stdout(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    Ok(Proc::spawn(cmd, what, log)?)
}

/// The server and the `run` replicas (`None` once killed), with where
/// each replica serves its metrics.
pub(super) struct Procs {
    pub(super) server: Proc,
    pub(super) replicas: Vec<Option<Proc>>,
    pub(super) metrics: Vec<SocketAddr>,
}

impl Procs {
    pub(super) fn check(&mut self) -> Result<()> {
        self.server.check()?;
        Ok(self.replicas.iter_mut().flatten().try_for_each(Proc::check)?)
    }

    pub(super) fn replica(&self, i: usize) -> Result<&Proc> {
        self.replicas.get(i).and_then(Option::as_ref).with_context(|| format!("nodewarden run #{i} is not running"))
    }
}

/// Replica `n` of `nodewarden run` (`HOSTNAME=wire-load-N`, so its
/// identity in the Lease starts with that).
pub(super) fn start_replica(
    binary: &Path,
    kubeconfig: &Path,
    dir: &Path,
    n: usize,
    procs: &mut Procs,
    o: &Options,
) -> Result<()> {
    let metrics = free_port().context("finding a free port")?;
    let mut args: Vec<String> = vec![
        "run".into(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--bind-address".into(),
        metrics.to_string(),
        "--log-format".into(),
        "json".into(),
    ];
    if !o.failover {
        args.push("--leader-elect=false".into());
    }
    if o.cold {
        args.push("--warm-standby=false".into());
    }
    args.extend(o.run_flags.iter().cloned());
    let host = format!("wire-load-{n}");
    let mut p = spawn(
        binary,
        &args,
        &format!("nodewarden run #{n}"),
        dir.join(format!("run-{n}.log")),
        &[("RUST_LOG", "info"), ("HOSTNAME", &host)],
    )?;
    // It writes nothing there; a pipe nobody reads would block it.
    drop(p.take_stdout());
    procs.replicas.push(Some(p));
    procs.metrics.push(metrics);
    Ok(())
}

/// Waits for a line of `tail` whose message starts with `prefix`, while
/// every process runs; its time stamp.
pub(super) async fn wait_for_line(procs: &mut Procs, tail: &mut LogTail, prefix: &str, limit: Duration) -> Result<i64> {
    let until = Instant::now() + limit;
    loop {
        if let Some(at) = tail.find(prefix) {
            return Ok(at);
        }
        procs.check()?;
        if Instant::now() > until {
            bail!(
                "no line {prefix:?} in {} within {} s; its end:\n{}",
                tail.path.display(),
                limit.as_secs(),
                process::tail(&tail.path)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The time stamp (Unix nanoseconds) and message of one line of
/// `nodewarden run --log-format json`.
pub(super) fn log_line(line: &str) -> Option<(i64, String)> {
    let v: Value = serde_json::from_str(line).ok()?;
    let at = parse_rfc3339(v.get("timestamp")?.as_str()?)?;
    Some((at, v.get("message")?.as_str()?.to_string()))
}

/// Reads a growing log from where it last stopped.
pub(super) struct LogTail {
    pub(super) path: PathBuf,
    pub(super) offset: u64,
    pub(super) partial: String,
}

impl LogTail {
    pub(super) fn new(path: &Path) -> LogTail {
        LogTail { path: path.to_path_buf(), offset: 0, partial: String::new() }
    }

    /// The time stamp of the first line, new since the last call, whose
    /// message starts with `prefix`.
    pub(super) fn find(&mut self, prefix: &str) -> Option<i64> {
        let mut file = std::fs::File::open(&self.path).ok()?;
        file.seek(SeekFrom::Start(self.offset)).ok()?;
        let mut new = String::new();
        let read = file.read_to_string(&mut new).ok()?;
        self.offset += read as u64;
        self.partial.push_str(&new);
        let mut found = None;
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            if found.is_none()
                && let Some((at, message)) = log_line(line.trim_end())
                && message.starts_with(prefix)
            {
                found = Some(at);
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_are_found_once_whole() {
        let line = r#"{"timestamp":"2026-11-26T01:23:28.322787Z","level":"INFO","message":"leading: deciding from what this standby observed","synced":true}"#;
        let (t, message) = log_line(line).expect("a line");
        assert_eq!(nodewarden_objects::format_rfc3339(t, true), "2026-11-26T01:23:28.322787Z");
        assert!(message.starts_with("leading: deciding"));
        assert_eq!(log_line("thread 'main' panicked"), None);

        let dir = std::env::temp_dir().join(format!("nodewarden-wire-load-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("run.log");
        let head = &line[..40];
        std::fs::write(&path, format!("not json\n{head}")).expect("write");
        let mut tail = LogTail::new(&path);
        assert_eq!(tail.find("leading: deciding"), None, "half a line");
        std::fs::write(&path, format!("not json\n{line}\n")).expect("write");
        assert_eq!(tail.find("leading: deciding"), Some(t));
        assert_eq!(tail.find("leading: deciding"), None, "each line once");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
