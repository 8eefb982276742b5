//! What a process costs, from Linux's `/proc`: resident memory now and at
//! its peak, and CPU time since its launch. The report's memory and CPU
//! figures are all read here, the harness's own included.

use std::process::Command;

use anyhow::{Context, Result};
use nodewarden_harness::process::Proc;

/// Memory and CPU of a process so far, from `/proc`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Usage {
    /// VmRSS, bytes.
    pub(super) rss: u64,
    /// VmHWM (the peak RSS), bytes.
    pub(super) peak: u64,
    /// User plus system CPU, seconds.
    pub(super) cpu: f64,
}

/// VmRSS and VmHWM of `/proc/PID/status`, in bytes.
pub(super) fn parse_status(text: &str) -> Option<(u64, u64)> {
    let kib = |key: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        line[key.len()..].split_whitespace().next()?.parse::<u64>().ok().map(|k| k * 1024)
    };
    Some((kib("VmRSS:")?, kib("VmHWM:")?))
}

/// utime + stime of `/proc/PID/stat`, in seconds (`tick` clock ticks a
/// second). The fields are counted after the command's closing
/// parenthesis, since a command may contain spaces.
pub(super) fn parse_stat_cpu(text: &str, tick: f64) -> Option<f64> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / tick)
}

/// Clock ticks a second (`getconf CLK_TCK`; 100 on every Linux in use).
pub(super) fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

pub(super) fn usage_of(pid: &str, tick: f64) -> Result<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status (Linux only)"))?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat (Linux only)"))?;
    let (rss, peak) = parse_status(&status).with_context(|| format!("no VmRSS/VmHWM in /proc/{pid}/status"))?;
    let cpu = parse_stat_cpu(&stat, tick).with_context(|| format!("unreadable /proc/{pid}/stat"))?;
    Ok(Usage { rss, peak, cpu })
}

/// Memory and CPU of one of the harness's processes, named in the error.
pub(super) fn usage(p: &Proc, tick: f64) -> Result<Usage> {
    usage_of(&p.id().to_string(), tick).with_context(|| p.what().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_read() {
        let status = "Name:\tnodewarden\nVmPeak:\t 9 kB\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(parse_status(status), Some((1024 * 1024, 2048 * 1024)));
        assert_eq!(parse_status("Name:\tx\n"), None);
        // A command with spaces and a parenthesis: fields count after the last ')'.
        let stat = "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_stat_cpu(stat, 100.0), Some(3.0));
        assert_eq!(parse_stat_cpu("42 (x) S 1", 100.0), None);
    }
}
