//! The chaos trials, shortened ten times (`Scale::short`), against this
//! package's `nodewarden` binary: the leader killed
//! mid-eviction, and the API server throttling mid-eviction. Each is about
//! 50 s; `cargo xtask chaos` runs all nine at full scale.

use std::path::PathBuf;

use nodewarden_chaos::{Scale, Trial, Verdict};

fn trial(t: Trial) -> Verdict {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_nodewarden"));
    let v = nodewarden_chaos::run(&bin, t, &Scale::short()).expect("the trial runs");
    println!("{}", serde_json::to_string_pretty(&v).expect("json"));
    v
}

#[test]
fn the_leader_killed_mid_eviction() {
    let v = trial(Trial::FailoverKill);
    assert!(v.pass, "{:?}", v.failures);
    assert!(v.replicas_started >= 3, "a replica was killed and another started");
}

#[test]
fn the_api_server_throttling_mid_eviction() {
    let v = trial(Trial::ApiThrottle);
    assert!(v.pass, "{:?}", v.failures);
    assert_eq!(v.leadership_lost, 0);
}
