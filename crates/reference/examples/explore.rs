//! Runs many random plans, shrinks the first failure of each kind to a
//! minimal plan and prints it with a trace of both sides' writes:
//! `cargo run --release -p nodewarden-reference --example explore -- [runs] [seed]`.
//! `ALL=1` also prints every failure's one-line summary; `PICK=n` shrinks
//! and traces the n-th failure instead of the first of each kind.

use nodewarden_reference::{Checks, Failure, Harness, Plan};

fn kind(f: &Failure) -> String {
    match f {
        Failure::Invariant { violation, .. } => format!("invariant {}", violation.invariant),
        Failure::Contract { .. } => "contract".to_string(),
        Failure::Divergence { difference, .. } => {
            format!("divergence {}", difference.subject.split(' ').next().unwrap_or(""))
        }
    }
}

fn shrink(mut plan: Plan, want: &str) -> Plan {
    loop {
        let mut progress = false;
        let mut i = 0;
        while i < plan.steps.len() {
            let mut smaller = plan.clone();
            smaller.steps.remove(i);
            match Harness::run(&smaller, Checks::default()) {
                Err(f) if kind(&f) == want => {
                    plan = smaller;
                    progress = true;
                }
                _ => i += 1,
            }
        }
        if !progress {
            return plan;
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let runs: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let mut seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let (mut steps, mut instants, mut actions, mut failures) = (0usize, 0u64, 0u64, 0u64);
    let mut kinds = std::collections::BTreeMap::<String, u64>::new();
    let started = std::time::Instant::now();
    for run in 0..runs {
        let mut bytes = vec![0u8; 2048];
        for b in bytes.iter_mut() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            *b = seed as u8;
        }
        let plan = Plan::from_bytes(&bytes);
        match Harness::run(&plan, Checks::default()) {
            Ok(s) => {
                steps += s.steps;
                instants += s.instants;
                actions += s.actions;
            }
            Err(f) => {
                failures += 1;
                if std::env::var("ALL").is_ok() {
                    println!("ALL {f}");
                }
                let count = kinds.entry(kind(&f)).or_default();
                *count += 1;
                let pick: Option<u64> = std::env::var("PICK").ok().and_then(|v| v.parse().ok());
                if pick.map_or(*count == 1, |p| p == failures) {
                    let small = shrink(plan, &kind(&f));
                    let mut h = Harness::new(&small.setup, Checks::default());
                    h.record_trace();
                    let mut result = Ok(());
                    for s in &small.steps {
                        result = h.step(s);
                        if result.is_err() {
                            break;
                        }
                    }
                    println!("run {run}: {f}\nminimal setup {:?} config {:?}", small.setup, small.setup.config());
                    let trace = h.trace();
                    for line in &trace[trace.len().saturating_sub(30)..] {
                        println!("{line}");
                    }
                    if let Err(f) = result {
                        println!("=> {f}");
                    }
                }
            }
        }
    }
    println!("failure kinds: {kinds:?}");
    println!(
        "{runs} runs in {:?}: {failures} failed; {steps} steps, {instants} instants, {actions} actions",
        started.elapsed()
    );
}
