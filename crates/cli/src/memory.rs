//! How much memory `nodewarden sim` will need, worked out before the
//! cluster is built, against what the machine has left: a run too big for
//! the machine is refused at once, naming the size that fits, rather than
//! found out when the machine runs out of memory minutes later.

use anyhow::bail;

/// What a `sim` process holds whatever the cluster's size.
///
/// The three costs are fitted to the peak RSS of whole release-build runs
/// (zone-outage, `/usr/bin/time -v`; the cluster, the controller and its
/// safety checker included): 20,000 nodes x 5 pods 389 MB, 40,000 x 5
/// 759 MB, 5,000 x 80 1,008 MB, then checked on 1,000 x 30 (89 MB,
/// estimated 95) and 10,000 x 30 (785 MB, estimated 803). A simulated hour
/// peaks no higher than ten minutes do: the peak is the first tick, which
/// takes in the whole cluster. The fit overestimates 100,000 x 10 by about
/// 10% (docs/simulation.md: 2.74 GB measured), on the safe side.
const BASE_BYTES: u64 = 16 << 20;
/// Each simulated node: its kubelet, Lease, node object, the engine's and
/// the checker's rows.
const NODE_BYTES: u64 = 6_600;
/// Each simulated pod, likewise.
const POD_BYTES: u64 = 2_400;
/// Runs estimated above this are announced on stderr before they start.
const ANNOUNCE_ABOVE: u64 = 1 << 30;

/// The estimated peak RSS of `sim` with `nodes` nodes of `pods_per_node`
/// pods each (saturating: a size that overflows is simply too big).
pub(crate) fn estimate(nodes: usize, pods_per_node: usize) -> u64 {
    let (nodes, per_node) = (nodes as u64, pods_per_node as u64);
    let each = NODE_BYTES.saturating_add(POD_BYTES.saturating_mul(per_node));
    BASE_BYTES.saturating_add(nodes.saturating_mul(each))
}

/// The largest node count whose estimate fits in `available` bytes at
/// `pods_per_node`, rounded down to two significant digits (a size to
/// type, with some room); 0 when not even one node fits.
pub(crate) fn largest_fitting(available: u64, pods_per_node: usize) -> usize {
    let each = NODE_BYTES.saturating_add(POD_BYTES.saturating_mul(pods_per_node as u64));
    let n = available.saturating_sub(BASE_BYTES) / each;
    let mut scale = 1;
    while n / scale >= 100 {
        scale *= 10;
    }
    usize::try_from(n / scale * scale).unwrap_or(usize::MAX)
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// What a memory cgroup still allows: its limit less its usage; `None`
/// for no limit (`max`, or cgroup v1's near-2^63 "unlimited").
fn cgroup_room(limit: &str, usage: &str) -> Option<u64> {
    let limit: u64 = limit.trim().parse().ok()?;
    if limit >= 1 << 60 {
        return None;
    }
    let usage: u64 = usage.trim().parse().unwrap_or(0);
    Some(limit.saturating_sub(usage))
}

/// What this process may still use: the machine's available memory, or
/// the memory cgroup's room when that is less (a container's limit).
/// `None` when neither can be read (not Linux).
pub(crate) fn available() -> Option<u64> {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let machine = read("/proc/meminfo").as_deref().and_then(mem_available);
    let cgroup = [
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ]
    .into_iter()
    .find_map(|(limit, usage)| cgroup_room(&read(limit)?, &read(usage).unwrap_or_default()));
    match (machine, cgroup) {
        (Some(m), Some(c)) => Some(m.min(c)),
        (m, c) => m.or(c),
    }
}

/// Bytes for people: `850 MiB`, `2.9 GiB`, `4.3 TiB`.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    let b = bytes as f64;
    if b < 1024.0 * MIB {
        format!("{:.0} MiB", b / MIB)
    } else if b < 1024.0 * 1024.0 * MIB {
        format!("{:.1} GiB", b / (1024.0 * MIB))
    } else {
        format!("{:.1} TiB", b / (1024.0 * 1024.0 * MIB))
    }
}

/// The refusal, when `nodes` x `pods_per_node` does not fit in `available`.
fn refusal(nodes: usize, pods_per_node: usize, available: u64) -> Option<String> {
    let need = estimate(nodes, pods_per_node);
    if need <= available {
        return None;
    }
    let fits = largest_fitting(available, pods_per_node);
    let advice = if fits == 0 {
        format!("not one node of {pods_per_node} pods fits; lower --pods-per-node")
    } else {
        format!("at {pods_per_node} pods per node, --nodes {fits} fits")
    };
    Some(format!(
        "--nodes {nodes} with --pods-per-node {pods_per_node} would need about {} of memory \
         ({NODE_BYTES} bytes a node and {POD_BYTES} a pod, as measured), more than the {} available; {advice}",
        human_bytes(need),
        human_bytes(available),
    ))
}

/// Before a built-in fleet is built: refuses a size that would not fit in
/// memory (exit 2), and announces a big one on stderr unless `quiet`.
pub(crate) fn check(nodes: usize, pods_per_node: usize, quiet: bool) -> anyhow::Result<()> {
    let available = available();
    if let Some(why) = available.and_then(|a| refusal(nodes, pods_per_node, a)) {
        bail!(why);
    }
    let need = estimate(nodes, pods_per_node);
    if !quiet && need > ANNOUNCE_ABOVE {
        let of = available.map_or(String::new(), |a| format!(" of the {} available", human_bytes(a)));
        eprintln!(
            "sim: {nodes} nodes and {} pods will take about {}{of}",
            nodes.saturating_mul(pods_per_node),
            human_bytes(need)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_matches_the_measured_runs_within_a_tenth() {
        // (nodes, pods per node, measured peak RSS in bytes)
        for (nodes, per_node, measured) in [
            (20_000, 5, 388_710_400u64),
            (40_000, 5, 759_427_072),
            (5_000, 80, 1_007_923_200),
            (1_000, 30, 88_567_808),
            (10_000, 30, 784_740_352),
        ] {
            let e = estimate(nodes, per_node) as f64;
            let off = (e - measured as f64) / measured as f64;
            assert!((-0.1..=0.1).contains(&off), "{nodes} x {per_node}: estimated {e}, measured {measured}");
        }
        assert_eq!(estimate(usize::MAX, usize::MAX), u64::MAX);
    }

    #[test]
    fn a_fleet_too_big_is_refused_naming_the_size_that_fits() {
        let available = 16u64 << 30;
        assert_eq!(refusal(100_000, 30, available), None, "{} fits in 16 GiB", human_bytes(estimate(100_000, 30)));
        let why = refusal(10_000_000, 30, available).expect("210,000 nodes at most");
        let fits = largest_fitting(available, 30);
        assert_eq!(fits, 210_000);
        assert!(estimate(fits, 30) <= available && estimate(fits * 11 / 10, 30) > available);
        assert!(why.starts_with("--nodes 10000000 with --pods-per-node 30 would need about 732.0 GiB"), "{why}");
        assert!(why.ends_with("more than the 16.0 GiB available; at 30 pods per node, --nodes 210000 fits"), "{why}");
        let why = refusal(1, 100_000_000, available).expect("one node of 10^8 pods");
        assert!(why.ends_with("not one node of 100000000 pods fits; lower --pods-per-node"), "{why}");
    }

    #[test]
    fn memory_is_read_from_meminfo_and_the_cgroup() {
        let meminfo = "MemTotal:       24684096 kB\nMemFree:  1 kB\nMemAvailable:   23555520 kB\n";
        assert_eq!(mem_available(meminfo), Some(23_555_520 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(cgroup_room("max\n", "123\n"), None);
        assert_eq!(cgroup_room("9223372036854771712\n", "1"), None);
        assert_eq!(cgroup_room("4294967296\n", "1073741824\n"), Some(3 << 30));
        assert_eq!(human_bytes(850 << 20), "850 MiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }
}
