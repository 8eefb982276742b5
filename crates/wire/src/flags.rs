//! A scenario file's client rate as `nodewarden run`'s flags (its
//! controller flags are the model's `flags::command_line`).

use nodewarden_cluster::ApiLatency;

/// The file's client rate (`cluster.api.kube-api-qps` and
/// `kube-api-burst`), as `run`'s flags, so the wire sends under the rate
/// replay plays; none when the file gives no rate (then `run` sends at its
/// defaults, 20 and 30, where replay has no limit).
pub fn client_flags(api: &ApiLatency) -> Vec<String> {
    match api.client_rate() {
        Some((qps, burst)) => vec![format!("--kube-api-qps={qps}"), format!("--kube-api-burst={burst}")],
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_files_client_rate_is_runs_and_no_rate_leaves_runs_defaults() {
        let rated: ApiLatency = "qps=5".parse().expect("parses");
        assert_eq!(client_flags(&rated), ["--kube-api-qps=5", "--kube-api-burst=30"]);
        assert!(client_flags(&ApiLatency::REALISTIC).is_empty());
    }
}
