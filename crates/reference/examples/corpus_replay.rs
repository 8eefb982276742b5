//! Runs a fuzz corpus through the `engine_steps` harness without libFuzzer,
//! for profiling what an execution costs (callgrind counts, or plain
//! executions per second):
//!
//! ```text
//! cargo build --release -p nodewarden-reference --example corpus_replay
//! target/release/examples/corpus_replay fuzz/corpus/engine_steps [ROUNDS] [--fresh]
//! ```
//!
//! Plans run on one harness reset for each, as the fuzz target runs them;
//! with `--fresh`, each on a new harness.
//!
//! A failing input is reported and counted, not fatal.

use std::time::Instant;

use nodewarden_reference::{Checks, Harness, Plan};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).map_or("fuzz/corpus/engine_steps", String::as_str);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1);
    let fresh = args.iter().any(|a| a == "--fresh");
    let mut harness = None;
    let mut inputs: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.file_name().to_string_lossy().to_string(), std::fs::read(e.path()).ok()?)))
        .collect();
    inputs.sort();
    let started = Instant::now();
    let (mut runs, mut failures, mut instants) = (0u64, 0u64, 0u64);
    for _ in 0..rounds {
        for (name, bytes) in &inputs {
            let plan = Plan::from_bytes(bytes);
            let outcome = if fresh {
                Harness::run(&plan, Checks::default())
            } else {
                Harness::run_reusing(&mut harness, &plan, Checks::default())
            };
            match outcome {
                Ok(stats) => instants += stats.instants,
                Err(failure) => {
                    failures += 1;
                    eprintln!("{name}: {failure}");
                }
            }
            runs += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{runs} executions in {secs:.2} s: {:.0} exec/s, {:.0} instants per execution, {failures} failed",
        runs as f64 / secs,
        instants as f64 / runs as f64
    );
}
