//! `nodewarden shadow report`: reads a `--dry-run` replica's `GET /shadow`
//! and prints the comparison with kube-controller-manager as a table, with
//! an HTML page beside it on request (`--html FILE`).

use std::io::Write;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::{Args, Subcommand};
use nodewarden_harness::http::{self, Timeouts};
use nodewarden_shadow::Summary;

/// `nodewarden shadow ...`.
#[derive(Debug, Args)]
pub(crate) struct ShadowArgs {
    #[command(subcommand)]
    command: ShadowCommand,
}

#[derive(Debug, Subcommand)]
enum ShadowCommand {
    /// Print a `--dry-run` replica's comparison with kube-controller-manager.
    ///
    /// Reads `GET /shadow` on the replica's metrics address (its
    /// --bind-address) and prints, per kind of decision, how many agree,
    /// came earlier or later, or were made by one side only, the zones,
    /// the latest disagreements, and a plain verdict. Exits 0 when every
    /// decision agrees, 1 when some do not, 2 when the replica cannot be
    /// read.
    Report(ReportArgs),
}

#[derive(Debug, Args)]
struct ReportArgs {
    /// The replica's metrics address, e.g. http://127.0.0.1:10257 (a
    /// `kubectl port-forward` to its pod does).
    #[arg(long)]
    url: String,
    /// Also write the report as one self-contained HTML page here, with
    /// the distribution of time differences per kind.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Print the summary as JSON instead of the table.
    #[arg(long, conflicts_with = "html")]
    json: bool,
}

/// Runs `nodewarden shadow ...`: whether every decision agrees.
pub(crate) fn run(args: &ShadowArgs) -> anyhow::Result<bool> {
    match &args.command {
        ShadowCommand::Report(r) => report(r),
    }
}

fn report(args: &ReportArgs) -> anyhow::Result<bool> {
    let body = get(&args.url, "/shadow")?;
    let summary: Summary = serde_json::from_str(&body)
        .with_context(|| format!("{}/shadow did not answer with a shadow summary", args.url.trim_end_matches('/')))?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&summary)?)?;
    } else {
        write!(out, "{}", nodewarden_shadow::report::table(&summary))?;
    }
    if let Some(path) = &args.html {
        std::fs::write(path, nodewarden_shadow::report::html(&summary))
            .with_context(|| format!("writing {}", path.display()))?;
        writeln!(out, "HTML report written to {}", path.display())?;
    }
    Ok(summary.all_agree())
}

/// How long the replica has to answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// `GET path` on a plain-HTTP `url` (`http://HOST:PORT`): the body of a 200
/// answer; an error naming the address and what came back otherwise.
fn get(url: &str, path: &str) -> anyhow::Result<String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("--url {url}: expected http://HOST:PORT (the replica's plain-HTTP metrics address)"))?;
    let host = rest.trim_end_matches('/');
    if host.is_empty() || host.contains('/') {
        bail!("--url {url}: expected http://HOST:PORT, without a path");
    }
    let addr = host
        .to_socket_addrs()
        .with_context(|| format!("--url {url}: cannot resolve {host} (is the port given?)"))?
        .next()
        .ok_or_else(|| anyhow!("--url {url}: {host} resolves to no address"))?;
    let answer = http::get(addr, host, path, Timeouts { connect: TIMEOUT, read: TIMEOUT })
        .with_context(|| format!("{url}{path} ({addr})"))?;
    if answer.code != 200 {
        let body = &answer.body;
        let why = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
            .unwrap_or_else(|| body.trim().chars().take(200).collect());
        bail!("{url}{path} answered {}: {why}", answer.status);
    }
    Ok(answer.body)
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn a_url_that_is_not_plain_http_is_refused_with_what_is_expected() {
        let e = get("https://127.0.0.1:10257", "/shadow").expect_err("https");
        assert!(e.to_string().contains("expected http://HOST:PORT"), "{e}");
        let e = get("http://127.0.0.1:10257/shadow", "/shadow").expect_err("a path");
        assert!(e.to_string().contains("without a path"), "{e}");
    }

    #[test]
    fn an_answer_other_than_200_says_why() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let body = r#"{"error":"no shadow here"}"#;
            let _ = write!(s, "HTTP/1.1 404 Not Found\r\ncontent-length: {}\r\n\r\n{body}", body.len());
        });
        let e = get(&format!("http://{addr}"), "/shadow").expect_err("404");
        assert!(e.to_string().contains("404") && e.to_string().contains("no shadow here"), "{e}");
        server.join().expect("server");
    }
}
