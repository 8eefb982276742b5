//! `nodewarden sim --serve`: the simulated cluster behind the Kubernetes
//! API, in real time, until Ctrl-C.

use std::io::{self, IsTerminal, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use nodewarden_apiserver::{PlannedApiFault, Security, ServeOptions, ServeSource, Served, ServerConfig};
use nodewarden_cluster::fleet::FleetSpec;
use nodewarden_cluster::{AdmissionDefaults, Builtin, KubeletTiming, load_scenario};
use nodewarden_model::{Span, Timestamp};

use crate::sim_args::{CommonArgs, FleetArgs, ServeArgs};

fn options(common: &CommonArgs, fleet: &FleetArgs, args: &ServeArgs) -> anyhow::Result<ServeOptions> {
    if fleet.nodes == 0 {
        bail!("--nodes must be at least 1");
    }
    if fleet.zones == 0 || fleet.zones > fleet.nodes {
        bail!("--zones must be from 1 to --nodes ({}), got {}", fleet.nodes, fleet.zones);
    }
    // Not a rule of modes (clap's): --legacy is the served mode's flag
    // too, but only for the controller that --controller runs in it.
    if common.legacy && !args.controller {
        bail!("--legacy does not apply to --serve");
    }
    let spec =
        FleetSpec { nodes: fleet.nodes, zones: fleet.zones, pods_per_node: fleet.pods_per_node, seed: common.seed };
    let mut timing = KubeletTiming::default();
    let source = match common.scenario.as_deref() {
        None | Some("none") => ServeSource::Fleet(spec, None),
        Some(name) => match name.parse::<Builtin>() {
            Ok(b) => ServeSource::Fleet(spec, Some(b)),
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
    let fleet_admission = fleet_admission(&source, args)?;
    let heal_at = match (args.heal_at, &source) {
        (Some(_), ServeSource::File(_)) => {
            bail!("--heal-at moves a built-in scenario's heal; a scenario file says its own (kubelet-start)")
        }
        (Some(at), _) if at <= Span::ZERO => bail!("--heal-at must be after the start, got {at}"),
        (at, _) => at.map(|at| Timestamp::EPOCH + at),
    };
    let api_faults = args.api_fault.iter().map(|s| s.parse::<PlannedApiFault>()).collect::<Result<Vec<_>, _>>()?;
    let controller = match (&source, args.controller) {
        (_, false) => None,
        // A scenario file brings its controller's flags (`config:`), as it
        // does for `nodewarden sim`: its rescheduler flags included.
        (ServeSource::File(scenario), true) => {
            if common.config.is_some() {
                bail!("--config does not apply to a scenario file: the file's own `config:` is the controller's");
            }
            let mut config = scenario.config.clone();
            if common.legacy {
                config.enable_taint_manager = false;
            }
            Some(config)
        }
        (ServeSource::Fleet(..), true) => Some(common.controller_config()?),
    };
    let speed = match fleet.speed {
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
        request_journal: args.request_journal.clone(),
        fleet_admission,
        heal_at,
        server: ServerConfig {
            security: if args.plain_http { Security::PlainHttp } else { Security::Https },
            tls_sans: args.tls_san.clone(),
            ..ServerConfig::default()
        },
        ..ServeOptions::default()
    })
}

/// The DefaultTolerationSeconds settings for a generated fleet: the
/// apiserver's 300 s unless a flag says otherwise. A scenario file brings
/// its own (`cluster:`), so the flags are refused with one rather than
/// silently ignored.
fn fleet_admission(source: &ServeSource, args: &ServeArgs) -> anyhow::Result<AdmissionDefaults> {
    let flags = [
        ("--default-not-ready-toleration-seconds", args.default_not_ready_toleration_seconds),
        ("--default-unreachable-toleration-seconds", args.default_unreachable_toleration_seconds),
    ];
    for (flag, value) in flags {
        match value {
            Some(_) if matches!(source, ServeSource::File(_)) => bail!(
                "{flag} applies to a generated fleet; a scenario file says its own \
                 (cluster: default-not-ready-toleration-seconds / default-unreachable-toleration-seconds)"
            ),
            Some(v) if v < 0 => bail!("{flag} must be 0 or more seconds, got {v}"),
            _ => {}
        }
    }
    let defaults = AdmissionDefaults::default();
    Ok(AdmissionDefaults {
        not_ready_seconds: args.default_not_ready_toleration_seconds.or(defaults.not_ready_seconds),
        unreachable_seconds: args.default_unreachable_toleration_seconds.or(defaults.unreachable_seconds),
    })
}

/// Runs the server on `addr` (`--serve`'s) until Ctrl-C.
pub fn run(addr: SocketAddr, common: &CommonArgs, fleet: &FleetArgs, args: &ServeArgs) -> anyhow::Result<()> {
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
    let opts = options(common, fleet, args)?;
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
                    if !common.quiet {
                        let line = format!("sim --serve {url}: {}", served.status());
                        if live { eprint!("\r{line}\x1b[K") } else { eprintln!("{line}") }
                    }
                }
            }
        }
        if live && !common.quiet {
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
        sim: crate::sim_args::SimArgs,
    }

    /// The served mode's options from a command line after `--serve`.
    fn options_of(extra: &[&str]) -> anyhow::Result<ServeOptions> {
        let mut line = vec!["nodewarden", "--serve", "127.0.0.1:0"];
        line.extend_from_slice(extra);
        match Line::parse_from(line).sim.into_mode() {
            crate::sim_args::Mode::Serve { common, fleet, serve, .. } => options(&common, &fleet, &serve),
            other => panic!("not the served mode: {other:?}"),
        }
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

        let opts = options_of(&["--scenario", path, "--controller"]).expect("options");
        let config = opts.controller.expect("a controller");
        assert!(config.enable_rescheduler);
        assert_eq!(config.rescheduler_unschedulable_grace, nodewarden_model::Span::from_secs(3));

        let legacy = options_of(&["--scenario", path, "--controller", "--legacy"]).expect("options");
        assert!(legacy.controller.is_some_and(|c| c.enable_rescheduler && !c.enable_taint_manager));

        let both = options_of(&["--scenario", path, "--controller", "--config", flags.to_str().expect("utf-8")]);
        let err = both.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("--config does not apply to a scenario file"), "{err}");

        assert!(options_of(&["--scenario", path]).expect("options").controller.is_none());
        let fleet = options_of(&["--controller", "--config", flags.to_str().expect("utf-8")]).expect("options");
        let config = fleet.controller.expect("a controller");
        assert_eq!(config.node_monitor_grace_period, nodewarden_model::Span::from_secs(50));
        assert!(!config.enable_rescheduler);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// kube-apiserver's toleration flags shape a generated fleet's pods;
    /// a scenario file says its own, so they are refused with one, as
    /// `--heal-at` is (a file heals with kubelet-start).
    #[test]
    fn toleration_and_heal_flags_shape_a_fleet_only() {
        let opts = options_of(&["--scenario", "zone-outage"]).expect("options");
        assert_eq!(opts.fleet_admission, AdmissionDefaults::default(), "the apiserver's 300 s");
        assert_eq!(opts.heal_at, None);
        let opts = options_of(&[
            "--scenario",
            "zone-outage",
            "--default-unreachable-toleration-seconds",
            "30",
            "--heal-at",
            "4m",
        ])
        .expect("options");
        let expected = AdmissionDefaults { not_ready_seconds: Some(300), unreachable_seconds: Some(30) };
        assert_eq!(opts.fleet_admission, expected);
        assert_eq!(opts.heal_at, Some(Timestamp::from_secs(240)));

        let dir = std::env::temp_dir().join(format!("nodewarden-serve-tolerations-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("s.yaml");
        std::fs::write(&file, "nodes: [{name: a, ready: \"True\"}]\n").expect("write");
        let path = file.to_str().expect("utf-8");
        for (extra, says) in [
            (vec!["--scenario", path, "--default-not-ready-toleration-seconds", "5"], "a scenario file says its own"),
            (vec!["--scenario", path, "--heal-at", "4m"], "a scenario file says its own"),
            (vec!["--default-unreachable-toleration-seconds=-1"], "must be 0 or more"),
        ] {
            let err = options_of(&extra).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(says), "{extra:?}: {err}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
