//! `nodewarden sim --serve`: the simulated cluster behind the Kubernetes
//! API, in real time, until Ctrl-C.

use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use nodewarden_apiserver::{PlannedApiFault, ServeOptions, ServeSource, Served};
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
    for (flag, set) in
        [("--json", args.json), ("--report", args.report.is_some()), ("--legacy", args.legacy && !args.controller)]
    {
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
    let controller = if args.controller { Some(crate::sim::controller_config(args)?) } else { None };
    let speed = match args.speed {
        Some(s) if s.is_finite() && s > 0.0 => s,
        Some(s) => bail!("--speed must be a positive number, got {s}"),
        None => 1.0,
    };
    Ok(ServeOptions { source, timing, scenario_speed: speed, api_faults, controller, ..ServeOptions::default() })
}

/// Runs the server until Ctrl-C.
pub fn run(args: &SimArgs) -> anyhow::Result<()> {
    let Some(addr) = args.serve else { bail!("--serve needs an address") };
    if !addr.ip().is_loopback() && !args.insecure_allow_remote {
        bail!(
            "refusing to serve on {addr}: the simulated API server has no authentication and no TLS, so anyone who can reach it \
             can change the cluster; use a loopback address (127.0.0.1:PORT) or pass --insecure-allow-remote"
        );
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
