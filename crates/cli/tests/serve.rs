//! `nodewarden sim --serve` from the command line.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn nodewarden() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nodewarden"))
}

#[test]
fn refuses_a_non_loopback_address_over_plain_http_and_bad_faults_saying_why() {
    let out = match nodewarden().args(["sim", "--serve", "0.0.0.0:0", "--plain-http"]).output() {
        Ok(o) => o,
        Err(e) => panic!("run: {e}"),
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no authentication and no TLS") && err.contains("--insecure-allow-remote"), "{err}");
    let out = match nodewarden().args(["sim", "--serve", "127.0.0.1:0", "--api-fault", "errors:2@0s"]).output() {
        Ok(o) => o,
        Err(e) => panic!("run: {e}"),
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("rate \"2\" must be a number from 0 to 1"), "{err}");
}

#[test]
fn serves_and_writes_a_kubeconfig() {
    let path = std::env::temp_dir().join(format!("nodewarden-cli-serve-{}.kubeconfig", std::process::id()));
    let mut child = match nodewarden()
        .args([
            "sim",
            "--serve",
            "127.0.0.1:0",
            "--nodes",
            "3",
            "--zones",
            "1",
            "--pods-per-node",
            "2",
            "--quiet",
            "--write-kubeconfig",
        ])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("spawn: {e}"),
    };
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(line.trim(), format!("kubeconfig: {}", path.display()));
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    // HTTPS by default: the kubeconfig carries the CA and the token.
    assert!(
        text.contains("server: https://127.0.0.1:")
            && text.contains("\n    certificate-authority-data: ")
            && text.contains("\n  user:\n    token: ")
            && text.contains("current-context: nodewarden-sim"),
        "{text}"
    );
}

/// `--plain-http`: today's plain HTTP without authentication, on request.
#[test]
fn plain_http_serves_plain_http_without_credentials() {
    use nodewarden_harness::http::{self, Timeouts};
    let path = std::env::temp_dir().join(format!("nodewarden-cli-serve-plain-{}.kubeconfig", std::process::id()));
    let mut child = match nodewarden()
        .args(["sim", "--serve", "127.0.0.1:0", "--plain-http", "--nodes", "2", "--zones", "1", "--pods-per-node", "1"])
        .args(["--quiet", "--write-kubeconfig"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("spawn: {e}"),
    };
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    let addr = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: http://"))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no plain HTTP server in the kubeconfig ({line}):\n{text}"));
    assert!(text.contains("  user: {}\n") && !text.contains("certificate-authority-data"), "{text}");
    let ten = std::time::Duration::from_secs(10);
    let sock = addr.parse().unwrap_or_else(|e| panic!("{addr}: {e}"));
    let reply = http::get(sock, &addr, "/api/v1/nodes", Timeouts { connect: ten, read: ten });
    let _ = child.kill();
    let _ = child.wait();
    let reply = reply.unwrap_or_else(|e| panic!("GET over plain HTTP: {e}"));
    assert!(reply.code == 200 && reply.body.contains("\"kind\":\"NodeList\""), "{reply:?}");
}
