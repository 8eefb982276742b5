//! Target (a): arbitrary sequences of cluster changes and clock advances fed
//! to the engine, its actions applied back by the simulated API server;
//! the shared invariants are checked on every action and the reference
//! model is compared after every instant. Any failure panics (a crash).

#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use nodewarden_reference::{Checks, Harness, Plan};

thread_local! {
    /// One harness for every input, reset for each: building the engine's
    /// schedules anew for every input was most of an execution's time.
    static HARNESS: RefCell<Option<Harness>> = const { RefCell::new(None) };
}

fuzz_target!(|data: &[u8]| {
    let plan = Plan::from_bytes(data);
    let outcome = HARNESS.with_borrow_mut(|harness| Harness::run_reusing(harness, &plan, Checks::default()));
    if let Err(failure) = outcome {
        panic!("{failure}\nplan: {plan:?}");
    }
});
