//! `nodewarden run`'s controller flags, made from the model's table
//! ([`nodewarden_model::flags::FLAGS`]): each flag's name, help, type and
//! default come from there, so no flag is spelled or defaulted twice.

use clap::builder::PossibleValuesParser;
use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};
use nodewarden_model::flags::{DELETION_MODES, FLAGS, Field, Flag, OnCommandLine};
use nodewarden_model::{ControllerConfig, KubeVersion};

/// The controller flags given (or defaulted) on the command line, as a
/// configuration; the flags `--controllers` sets are left at their
/// defaults for the caller to lay over.
#[derive(Debug, Clone)]
pub(crate) struct ControllerFlags {
    /// The configuration the flags make.
    pub(crate) config: ControllerConfig,
}

/// `run` stands in for the oldest kube-controller-manager it supports: its
/// defaults are that release's.
fn defaults() -> ControllerConfig {
    ControllerConfig::of_kube_controller_manager(KubeVersion::OLDEST_SUPPORTED)
}

/// The flags `run` takes as `--name=value`.
fn command_line_flags() -> impl Iterator<Item = &'static Flag> {
    FLAGS.iter().filter(|f| f.on_command_line == OnCommandLine::Flag)
}

/// The clap argument of `flag`, with `defaults`' value as its default.
fn arg(flag: &'static Flag, defaults: &ControllerConfig) -> Arg {
    let arg =
        Arg::new(flag.name).long(flag.name).help(flag.help.trim_end_matches('.')).default_value(flag.text(defaults));
    let checked = move |text: &str| -> Result<String, String> {
        flag.set_text(&mut ControllerConfig::default(), text).map(|()| text.to_string())
    };
    match flag.field {
        Field::Span(..) => arg.value_name("DURATION").value_parser(checked),
        Field::Number(..) | Field::Count(..) => arg.value_name("N").value_parser(checked),
        // As Go's flags: `--enable-rescheduler` alone means true.
        Field::Switch(..) => arg.value_name("BOOL").num_args(0..=1).default_missing_value("true").value_parser(checked),
        Field::Deletion(..) => arg.value_name("MODE").value_parser(PossibleValuesParser::new(DELETION_MODES)),
    }
}

impl ControllerFlags {
    /// Lays the flags in `matches` over `config`.
    fn lay_over(config: &mut ControllerConfig, matches: &ArgMatches) -> Result<(), clap::Error> {
        for flag in command_line_flags() {
            if let Some(text) = matches.get_one::<String>(flag.name) {
                flag.set_text(config, text).map_err(|e| {
                    clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("--{}={text}: {e}\n", flag.name))
                })?;
            }
        }
        Ok(())
    }
}

impl FromArgMatches for ControllerFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut config = defaults();
        ControllerFlags::lay_over(&mut config, matches)?;
        Ok(ControllerFlags { config })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        ControllerFlags::lay_over(&mut self.config, matches)
    }
}

impl Args for ControllerFlags {
    fn augment_args(cmd: Command) -> Command {
        let defaults = defaults();
        command_line_flags().fold(cmd, |cmd, flag| cmd.arg(arg(flag, &defaults)))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        ControllerFlags::augment_args(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewarden_model::{DeletionMode, Span};

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        flags: ControllerFlags,
    }

    fn parse(args: &[&str]) -> Result<ControllerConfig, clap::Error> {
        let args = std::iter::once("run").chain(args.iter().copied());
        <Cli as clap::Parser>::try_parse_from(args).map(|c| c.flags.config)
    }

    #[test]
    fn every_flag_is_taken_by_its_name_and_reaches_the_configuration() {
        assert_eq!(parse(&[]).expect("defaults"), defaults());
        let c = parse(&[
            "--node-monitor-grace-period=45s",
            "--node-eviction-rate",
            "0.2",
            "--large-cluster-size-threshold=7",
            "--enable-taint-manager=false",
            "--pod-deletion-mode=evict",
            "--enable-rescheduler",
        ])
        .expect("parses");
        assert_eq!(c.node_monitor_grace_period, Span::from_secs(45));
        assert_eq!(c.node_eviction_rate, 0.2);
        assert_eq!(c.large_cluster_size_threshold, 7);
        assert!(!c.enable_taint_manager && c.enable_rescheduler);
        assert_eq!(c.pod_deletion_mode, DeletionMode::Evict);
        // Every `--name=value` flag of the table is an argument.
        for flag in command_line_flags() {
            let mut c = defaults();
            let text = flag.text(&c);
            flag.set_text(&mut c, &text).expect("its own text");
            parse(&[&format!("--{}={text}", flag.name)]).unwrap_or_else(|e| panic!("{}: {e}", flag.name));
        }
    }

    #[test]
    fn a_bad_value_is_refused_naming_the_flag() {
        let e = parse(&["--node-monitor-period=soon"]).expect_err("not a duration").to_string();
        assert!(e.contains("--node-monitor-period"), "{e}");
        let e = parse(&["--pod-deletion-mode=drain"]).expect_err("not a mode").to_string();
        assert!(e.contains("delete") && e.contains("evict"), "{e}");
        assert!(parse(&["--node-lifecycle=false"]).is_err(), "set through --controllers only");
    }
}
