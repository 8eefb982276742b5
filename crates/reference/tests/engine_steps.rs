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
