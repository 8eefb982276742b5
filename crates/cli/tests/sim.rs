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
