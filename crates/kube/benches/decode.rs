//! What a watch's list page costs to decode, an object at a time, beside
//! the floor: the same bytes parsed and thrown away.
//!
//! The page is what `nodewarden sim --serve` serves (`pod.json` and
//! `node.json` were listed from it; 500 objects, names and uids varied),
//! decoded from text as kube's client decodes a list (`serde_json::from_str`
//! over the body it checked as UTF-8), the ways a client can:
//! - `floor`: `serde::de::IgnoredAny`, serde_json scanning every byte and
//!   building nothing: no reader can do less.
//! - `value`: the whole page as a `serde_json::Value`.
//! - `openapi`: k8s-openapi's typed list, every field of every object.
//! - `trimmed`: the watches' own type, [`Trimmed`], as kube's watcher
//!   decodes it: only the fields the engine reads kept, then read.
//!
//! `cargo bench -p nodewarden-kube --bench decode`; the per-object time is
//! the reported time divided by 500.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::{List, ListableResource};
use nodewarden_kube::{Scheduled, Trimmed};
use serde::de::IgnoredAny;

/// Objects a page: kube's watcher lists 500 at a time.
const PAGE: usize = 500;

/// A list page of `PAGE` copies of `item`, each with its own name and uid.
fn page(kind: &str, item: &str) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_str(item).expect("a valid sample object");
    let items: Vec<serde_json::Value> = (0..PAGE)
        .map(|i| {
            v["metadata"]["name"] = format!("obj-{i:06}").into();
            v["metadata"]["uid"] = format!("6e776172-0000-4000-8000-{i:012}").into();
            v.clone()
        })
        .collect();
    let list = serde_json::json!({
        "apiVersion": "v1",
        "kind": format!("{kind}List"),
        "metadata": {"resourceVersion": "12345", "continue": "abc", "remainingItemCount": 1000},
        "items": items,
    });
    serde_json::to_vec(&list).expect("serializable")
}

fn decode<K>(c: &mut Criterion, kind: &str, item: &str)
where
    K: ListableResource + serde::de::DeserializeOwned,
    Trimmed<K>: serde::de::DeserializeOwned,
    Trimmed<Scheduled<K>>: serde::de::DeserializeOwned,
{
    let text = String::from_utf8(page(kind, item)).expect("serde_json writes UTF-8");
    let bytes = text.as_str();
    let mut group = c.benchmark_group(format!("decode/{kind}"));
    group.throughput(Throughput::Elements(PAGE as u64));
    group.bench_function("floor", |b| b.iter(|| serde_json::from_str::<IgnoredAny>(black_box(bytes)).unwrap()));
    group.bench_function("value", |b| b.iter(|| serde_json::from_str::<serde_json::Value>(black_box(bytes)).unwrap()));
    group.bench_function("openapi", |b| b.iter(|| serde_json::from_str::<List<K>>(black_box(bytes)).unwrap()));
    group.bench_function("trimmed", |b| {
        b.iter(|| serde_json::from_str::<kube::core::ObjectList<Trimmed<K>>>(black_box(bytes)).unwrap())
    });
    group.bench_function("trimmed_scheduling", |b| {
        b.iter(|| serde_json::from_str::<kube::core::ObjectList<Trimmed<Scheduled<K>>>>(black_box(bytes)).unwrap())
    });
    group.finish();
}

fn pods(c: &mut Criterion) {
    decode::<Pod>(c, "Pod", include_str!("../../objects/samples/pod.json"));
}

fn nodes(c: &mut Criterion) {
    decode::<Node>(c, "Node", include_str!("../../objects/samples/node.json"));
}

criterion_group!(benches, pods, nodes);
criterion_main!(benches);
