//! Target (b): the scenario parser and validator never panic, whatever the
//! text; a small valid scenario also replays without panicking.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nodewarden_model::Span;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(scenario) = nodewarden_cluster::parse_scenario(text) else { return };
    // Replaying is bounded by the virtual time and the cluster size.
    if scenario.end().since_epoch() <= Span::from_secs(600) && scenario.nodes.len() <= 20 && scenario.pods.len() <= 50 {
        let _ = nodewarden_sim::replay(&scenario, &nodewarden_sim::ReplayOptions { quiet: true, ..Default::default() });
    }
});
