//! Target (a): arbitrary sequences of cluster changes and clock advances fed
//! to the engine, its actions applied back by the simulated API server;
//! the shared invariants are checked on every action and the reference
//! model is compared after every instant. Any failure panics (a crash).

#![no_main]

use libfuzzer_sys::fuzz_target;
use nodewarden_reference::{Checks, Harness, Plan};

fuzz_target!(|data: &[u8]| {
    let plan = Plan::from_bytes(data);
    if let Err(failure) = Harness::run(&plan, Checks::default()) {
        panic!("{failure}\nplan: {plan:?}");
    }
});
