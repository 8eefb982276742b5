//! `nodewarden sim --serve`: the simulated cluster behind the Kubernetes
//! API, in real time, until Ctrl-C.

use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use nodewarden_apiserver::{PlannedApiFault, Security, ServeOptions, ServeSource, Served, ServerConfig};
use nodewarden_sim::fleet::FleetSpec;
use nodewarden_sim::{Builtin, KubeletTiming, load_scenario};

use crate::sim::SimArgs;

fn options(args: &SimArgs) -> anyhow::Result<ServeOptions> {
    if args.nodes == 0 {
        bail!("--nodes must be at least 1");
    }
    if args.zones == 0 || args.zones > args.nodes {
        bail!("--zones must be from 1 to --nodes ({}), got {}", args.nodes, args.zones);
    }
    for (flag, set) in [
        ("--json", args.json),
        ("--report", args.report.is_some()),
        ("--legacy", args.legacy && !args.controller),
        ("--api-latency (the served API's latency is the real one)", args.api_latency.is_some()),
    ] {
        if set {
            bail!("{flag} does not apply to --serve");
        }
    }
    let fleet = FleetSpec { nodes: args.nodes, zones: args.zones, pods_per_node: args.pods_per_node, seed: args.seed };
    let mut timing = KubeletTiming::default();
    let source = match args.scenario.as_deref() {
        None | Some("none") => ServeSource::Fleet(fleet, None),
        Some(name) => match name.parse::<Builtin>() {
            Ok(b) => ServeSource::Fleet(fleet, Some(b)),
            Err(unknown) => {
                let path = Path::new(name);
                if !path.is_file() {
                    bail!("{unknown} (or none)");
                }
                let scenario = load_scenario(path).with_context(|| format!("invalid scenario {}", path.display()))?;
                timing = KubeletTiming::from(&scenario.cluster.kubelet);
                ServeSource::File(Box::new(scenario))
            }
        },
    };
    let api_faults = args.api_fault.iter().map(|s| s.parse::<PlannedApiFault>()).collect::<Result<Vec<_>, _>>()?;
    let controller = match (&source, args.controller) {
        (_, false) => None,
        // A scenario file brings its controller's flags (`config:`), as it
        // does for `nodewarden sim`: its rescheduler flags included.
        (ServeSource::File(scenario), true) => {
            if args.config.is_some() {
                bail!("--config does not apply to a scenario file: the file's own `config:` is the controller's");
            }
            let mut config = scenario.config.clone();
            if args.legacy {
                config.enable_taint_manager = false;
            }
            Some(config)
        }
        (ServeSource::Fleet(..), true) => Some(crate::sim::controller_config(args)?),
    };
    let speed = match args.speed {
        Some(s) if s.is_finite() && s > 0.0 => s,
        Some(s) => bail!("--speed must be a positive number, got {s}"),
        None => 1.0,
    };
    Ok(ServeOptions {
        source,
        timing,
        scenario_speed: speed,
        api_faults,
        controller,
        zero_unix_nanos: args.start_at,
        journal: args.journal.clone(),
        server: ServerConfig {
            security: if args.plain_http { Security::PlainHttp } else { Security::Https },
            ..ServerConfig::default()
        },
        ..ServeOptions::default()
    })
}

/// Runs the server until Ctrl-C.
pub fn run(args: &SimArgs) -> anyhow::Result<()> {
    let Some(addr) = args.serve else { bail!("--serve needs an address") };
    if !addr.ip().is_loopback() {
        if !args.plain_http {
            tracing::warn!(
                %addr,
                "serving beyond loopback over HTTPS: anyone holding the kubeconfig (its token) can change the simulated cluster"
            );
        } else if !args.insecure_allow_remote {
            bail!(
                "refusing to serve on {addr}: with --plain-http the simulated API server has no authentication and no TLS, \
                 so anyone who can reach it can change the cluster; use a loopback address (127.0.0.1:PORT), drop \
                 --plain-http (HTTPS with a token), or pass --insecure-allow-remote"
            );
        }
    }
    let opts = options(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
        let served = Served::start(opts, listener).await?;
        let url = served.url();
        match &args.write_kubeconfig {
            Some(path) => {
                std::fs::write(path, served.kubeconfig())
                    .with_context(|| format!("cannot write {}", path.display()))?;
                println!("kubeconfig: {}", path.display());
            }
            None if served.token().is_some() => println!(
                "serving on {url} (no kubeconfig written; pass --write-kubeconfig FILE: the CA and the bearer token \
                 clients need are only in it)"
            ),
            None => println!("serving on {url} (no kubeconfig written; pass --write-kubeconfig FILE)"),
        }
        let _ = io::stdout().flush();
        let live = io::stderr().is_terminal();
        let mut every = tokio::time::interval(Duration::from_secs(if live { 1 } else { 10 }));
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = every.tick() => {
                    if !args.quiet {
                        let line = format!("sim --serve {url}: {}", served.status());
                        if live { eprint!("\r{line}\x1b[K") } else { eprintln!("{line}") }
                    }
                }
            }
        }
        if live && !args.quiet {
            eprintln!();
        }
        eprintln!("sim --serve: stopped");
        served.stop();
        Ok::<(), anyhow::Error>(())
    })?;
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Line {
        #[command(flatten)]
        sim: SimArgs,
    }

    fn args(extra: &[&str]) -> SimArgs {
        let mut line = vec!["nodewarden", "--serve", "127.0.0.1:0"];
        line.extend_from_slice(extra);
        Line::parse_from(line).sim
    }

    /// A scenario file's `config:` is the in-process controller's, its
    /// rescheduler flags included, as `nodewarden sim` takes it; a fleet's
    /// comes from `--config`.
    #[test]
    fn the_in_process_controller_takes_a_scenario_files_flags() {
        let dir = std::env::temp_dir().join(format!("nodewarden-serve-options-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("s.yaml");
        std::fs::write(
            &file,
            "config: {enable-rescheduler: true, rescheduler-unschedulable-grace: 3s}\n\
             nodes: [{name: a, ready: \"True\"}]\n",
        )
        .expect("write");
        let flags = dir.join("flags.yaml");
        std::fs::write(&flags, "node-monitor-grace-period: 50s\n").expect("write");
        let path = file.to_str().expect("utf-8");

        let opts = options(&args(&["--scenario", path, "--controller"])).expect("options");
        let config = opts.controller.expect("a controller");
        assert!(config.enable_rescheduler);
        assert_eq!(config.rescheduler_unschedulable_grace, nodewarden_model::Span::from_secs(3));

        let legacy = options(&args(&["--scenario", path, "--controller", "--legacy"])).expect("options");
        assert!(legacy.controller.is_some_and(|c| c.enable_rescheduler && !c.enable_taint_manager));

        let both = options(&args(&["--scenario", path, "--controller", "--config", flags.to_str().expect("utf-8")]));
        let err = both.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("--config does not apply to a scenario file"), "{err}");

        assert!(options(&args(&["--scenario", path])).expect("options").controller.is_none());
        let fleet = options(&args(&["--controller", "--config", flags.to_str().expect("utf-8")])).expect("options");
        let config = fleet.controller.expect("a controller");
        assert_eq!(config.node_monitor_grace_period, nodewarden_model::Span::from_secs(50));
        assert!(!config.enable_rescheduler);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
