//! The `nodewarden sim` contract, through the built binary: a summary (or
//! JSON) on stdout, exit 0 when every safety check held, 2 on bad flags.

use std::path::PathBuf;
use std::process::{Command, Output};

fn nodewarden(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewarden")).args(args).env_remove("RUST_LOG").output().expect("run nodewarden")
}

const SMALL: [&str; 8] = ["sim", "--nodes", "30", "--pods-per-node", "5", "--duration", "8m", "--quiet"];

#[test]
fn json_has_the_fields_scripts_read() {
    let mut args = SMALL.to_vec();
    args.push("--json");
    let o = nodewarden(&args);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
    for field in ["nodes", "pods", "simulated_seconds", "wall_seconds", "peak_rss_bytes", "tick_ms", "safety"] {
        assert!(v.get(field).is_some(), "missing {field}: {v}");
    }
    assert_eq!(v["nodes"], 30);
    assert_eq!(v["pods"], 150);
    assert_eq!(v["simulated_seconds"], 480.0);
    for key in ["p50", "p99", "max"] {
        assert!(v["tick_ms"][key].is_number(), "{}", v["tick_ms"]);
    }
    let safety = v["safety"].as_object().expect("an object");
    assert!(safety.len() >= 7 && safety.values().all(|ok| ok == true), "{safety:?}");
    assert!(String::from_utf8_lossy(&o.stderr).is_empty(), "--quiet prints nothing on stderr");
}

#[test]
fn summary_and_report_for_people() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nodewarden-sim-tests");
    std::fs::create_dir_all(&dir).expect("create the temp dir");
    let page = dir.join("report.html");
    let mut args = SMALL.to_vec();
    args.extend(["--scenario", "node-crash", "--report", page.to_str().expect("utf-8 path")]);
    let o = nodewarden(&args);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("What happened") && text.contains("Safety: all"), "{text}");
    let html = std::fs::read_to_string(&page).expect("the report was written");
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg") && !html.contains("<script"));
}

#[test]
fn bad_flags_exit_2_with_a_clear_message() {
    let o = nodewarden(&["sim", "--zones", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--zones must be at least 1"));
    let o = nodewarden(&["sim", "--scenario", "zone-outgae"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unknown scenario") && err.contains("control-plane-outage"), "{err}");
    let o = nodewarden(&["sim", "--nodes", "2", "--zones", "3"]);
    assert_eq!(o.status.code(), Some(2));
    // A scenario file brings its own controller flags: --config would be
    // ignored, so it is refused (the file named need not exist).
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/zone-outage.yaml");
    let o = nodewarden(&["sim", "--scenario", file, "--config", "flags.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--config does not apply to a scenario file"), "{err}");
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nodewarden-sim-tests");
    std::fs::create_dir_all(&dir).expect("create the temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write the file");
    path
}

#[test]
fn from_cluster_says_which_server_it_cannot_reach_and_why() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let kubeconfig = temp_file(
        "refused.kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: down\n  cluster: {{server: 'https://127.0.0.1:{port}'}}\n\
             users:\n- name: u\n  user: {{token: abc}}\ncontexts:\n- name: c\n  context: {{cluster: down, user: u}}\n\
             current-context: c\n"
        ),
    );
    let o = nodewarden(&["sim", "--from-cluster", "--kubeconfig", kubeconfig.to_str().expect("utf-8 path")]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end(), format!("error: cannot reach https://127.0.0.1:{port}: connection refused"));
}

#[test]
fn a_duration_without_a_unit_gets_a_suggestion_the_flag_takes() {
    let o = nodewarden(&["sim", "--duration", "10"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(r#"invalid duration "10": a number needs a unit, e.g. 10s or 10m"#), "{err}");
    assert!(!err.contains("-1h"), "--duration takes no negative duration: {err}");
    let o = nodewarden(&["sim", "--duration", "ten"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("e.g. 45s, 1m30s, 500ms") && !err.contains("-1h"), "{err}");
}

#[test]
fn a_tls_san_that_is_no_name_is_refused_naming_it() {
    let o = nodewarden(&["sim", "--serve", "127.0.0.1:0", "--tls-san", "sim_host"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(r#""sim_host" is neither an IP address nor a DNS name"#), "{err}");
    let o = nodewarden(&["sim", "--serve", "127.0.0.1:0", "--plain-http", "--tls-san", "sim.example.test"]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_bad_config_names_the_flag_once() {
    let config = temp_file("bad-flags.yaml", "node-monitor-grace-period: 5x\n");
    let o = nodewarden(&["sim", "--config", config.to_str().expect("utf-8 path")]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(r#": node-monitor-grace-period (line 1, column 28): invalid duration "5x""#), "{err}");
    assert_eq!(err.matches("node-monitor-grace-period").count(), 1, "{err}");
}

/// The estimate is made before the fleet is built: a fleet no machine
/// holds is refused at once, naming the size that fits here.
#[test]
fn a_fleet_too_big_for_memory_is_refused_up_front() {
    let started = std::time::Instant::now();
    let o = nodewarden(&["sim", "--nodes", "100000000", "--pods-per-node", "30"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(o.stdout.is_empty());
    assert!(
        err.starts_with("error: --nodes 100000000 with --pods-per-node 30 would need about 7.1 TiB of memory"),
        "{err}"
    );
    assert!(err.contains(" available; at 30 pods per node, --nodes ") && err.trim_end().ends_with(" fits"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "it built the fleet first");
}
