//! Property tests of the engine: random plans of steps (the `engine_steps`
//! fuzz target's input, drawn by proptest) run with the invariants checked
//! after every action and the reference model compared after every
//! instant.

use nodewarden_reference::{Checks, Harness, Plan};
use proptest::prelude::*;

/// Cases per property; `PROPTEST_CASES` overrides it (CI keeps the default).
const CASES: u32 = 384;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES)
}

fn plan_from(bytes: &[u8]) -> Plan {
    Plan::from_bytes(bytes)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn engine_keeps_invariants_and_agrees_with_the_reference(bytes in proptest::collection::vec(any::<u8>(), 256..2048)) {
        let plan = plan_from(&bytes);
        if let Err(failure) = Harness::run(&plan, Checks::default()) {
            prop_assert!(false, "{failure}\nplan: {plan:#?}");
        }
    }
}

/// The trace of `plan` (every step and every write of both sides) on
/// `harness`, which has been made ready for it; `Err` with the failure text.
fn trace_of(mut harness: Harness, plan: &Plan) -> (Vec<String>, Option<String>) {
    harness.record_trace();
    let failure = plan.steps.iter().find_map(|step| harness.step(step).err()).map(|f| f.to_string());
    (harness.trace().to_vec(), failure)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() / 8, max_shrink_iters: 500, ..ProptestConfig::default() })]

    /// A harness reset after running one plan (what the fuzzer does to save
    /// building the engine's schedules for every input) runs the next plan
    /// exactly as a new one does: the same writes, in the same order, at
    /// the same instants, and the same verdict.
    #[test]
    fn a_reset_harness_runs_a_plan_as_a_new_one_does(
        first in proptest::collection::vec(any::<u8>(), 64..1024),
        second in proptest::collection::vec(any::<u8>(), 64..1024),
    ) {
        let (first, second) = (plan_from(&first), plan_from(&second));
        let fresh = trace_of(Harness::new(&second.setup, Checks::default()), &second);
        let mut reused = Harness::new(&first.setup, Checks::default());
        for step in &first.steps {
            if reused.step(step).is_err() {
                break;
            }
        }
        reused.reset(&second.setup, Checks::default());
        let reused = trace_of(reused, &second);
        prop_assert_eq!(fresh, reused);
    }
}
