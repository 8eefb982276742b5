//! Target (c1): toleration matching and the taint manager's verdict
//! (`nodewarden_model::taint`) against the plain reference in
//! `nodewarden_reference::tolerations`.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nodewarden_model::taint::{Decision, decide, toleration_verdict};
use nodewarden_model::{Span, Taint, TaintEffect, Toleration, TolerationOperator, TolerationVerdict};
use nodewarden_reference::tolerations::{RefVerdict, tolerates, verdict};

/// A string from a small vocabulary (so keys and values collide), or any.
#[derive(Arbitrary, Debug)]
enum Text {
    Empty,
    A,
    B,
    Any(String),
}

impl Text {
    fn get(self) -> String {
        match self {
            Text::Empty => String::new(),
            Text::A => "a".into(),
            Text::B => "b".into(),
            Text::Any(s) => s,
        }
    }
}

#[derive(Arbitrary, Debug)]
struct T {
    key: Text,
    value: Text,
    effect: u8,
}

#[derive(Arbitrary, Debug)]
struct Tol {
    key: Text,
    exists: bool,
    value: Text,
    effect: Option<u8>,
    seconds: Option<i64>,
}

fn effect(e: u8) -> TaintEffect {
    [TaintEffect::NoExecute, TaintEffect::NoSchedule, TaintEffect::PreferNoSchedule][usize::from(e % 3)]
}

fuzz_target!(|input: (Vec<T>, Vec<Tol>)| {
    let taints: Vec<Taint> = input
        .0
        .into_iter()
        .take(8)
        .map(|t| Taint { key: t.key.get(), value: t.value.get(), effect: effect(t.effect), time_added: None })
        .collect();
    let tolerations: Vec<Toleration> = input
        .1
        .into_iter()
        .take(8)
        .map(|t| Toleration {
            key: t.key.get(),
            operator: if t.exists { TolerationOperator::Exists } else { TolerationOperator::Equal },
            value: t.value.get(),
            effect: t.effect.map(effect),
            seconds: t.seconds,
        })
        .collect();
    for tol in &tolerations {
        for taint in &taints {
            assert_eq!(tol.tolerates(taint), tolerates(tol, taint), "{tol:?} vs {taint:?}");
        }
    }
    let reference = verdict(&taints, &tolerations);
    let expected = match reference {
        RefVerdict::NoTaints | RefVerdict::Untolerated => TolerationVerdict::Now,
        RefVerdict::After(s) if s <= 0 => TolerationVerdict::Now,
        RefVerdict::After(s) => TolerationVerdict::After(Span::from_secs(s)),
        RefVerdict::Forever => TolerationVerdict::Never,
    };
    assert_eq!(toleration_verdict(&taints, &tolerations), expected, "{taints:?} / {tolerations:?}");
    let same = match (decide(&taints, &tolerations), reference) {
        (Decision::NoTaints, RefVerdict::NoTaints)
        | (Decision::Untolerated(_), RefVerdict::Untolerated)
        | (Decision::Forever, RefVerdict::Forever) => true,
        (Decision::Expires { seconds, .. }, RefVerdict::After(r)) => seconds == r || (seconds <= 0 && r <= 0),
        _ => false,
    };
    assert!(same, "decide disagrees: {taints:?} / {tolerations:?}");
});
