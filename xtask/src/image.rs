//! `cargo xtask image`: the container image.
//!
//! Builds the binary the Dockerfile's build stage builds (release,
//! `-p nodewarden`, static), checks it is static (an ELF with no program
//! interpreter), then runs `docker build` when a Docker engine answers;
//! without one it says so and prints the command to run where there is.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

const MUSL: &str = "x86_64-unknown-linux-musl";
const GNU: &str = "x86_64-unknown-linux-gnu";

/// True when the ELF file has no PT_INTERP program header (no dynamic
/// loader: statically linked).
fn is_static(path: &Path) -> Result<bool> {
    let b = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 {
        bail!("{} is not a 64-bit ELF file", path.display());
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into()?) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    for i in 0..count {
        let at = phoff + i * size;
        let kind = u32::from_le_bytes(b.get(at..at + 4).context("truncated program headers")?.try_into()?);
        if kind == 3 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `cargo xtask image`'s flags.
#[derive(Debug, clap::Args)]
pub(crate) struct ImageArgs {
    /// The image's name and tag, e.g. registry.example/nodewarden:0.1.0.
    #[arg(long, value_name = "NAME:TAG", default_value = concat!("nodewarden:", env!("CARGO_PKG_VERSION")))]
    tag: String,
}

/// Builds the binary, checks it is static, and builds the image when
/// Docker answers.
pub fn image(args: ImageArgs) -> Result<()> {
    let tag = args.tag;
    // Paths below (target/, the Dockerfile's context) are the workspace's.
    std::env::set_current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .context("cannot change to the workspace root")?;
    let cargo = crate::cargo();
    let installed = Command::new("rustup").args(["target", "list", "--installed"]).output();
    let has_musl = installed.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l.trim() == MUSL));
    // The Dockerfile builds for musl; without that target here, a static
    // glibc build is the closest check that the binary builds static.
    let (target, rustflags) = if has_musl {
        (MUSL, String::new())
    } else {
        eprintln!("note: the {MUSL} target is not installed here; building a static glibc binary instead");
        (GNU, "-C target-feature=+crt-static".to_string())
    };
    let build = ["build", "--release", "--locked", "-p", "nodewarden", "--target", target];
    eprintln!(
        "$ {}{cargo} {}",
        if rustflags.is_empty() { String::new() } else { format!("RUSTFLAGS={rustflags:?} ") },
        build.join(" ")
    );
    let mut cmd = Command::new(&cargo);
    cmd.args(build);
    if !rustflags.is_empty() {
        cmd.env("RUSTFLAGS", &rustflags);
    }
    let status = cmd.status().with_context(|| format!("could not start {cargo}"))?;
    if !status.success() {
        bail!("building the release binary failed ({status})");
    }
    let binary = crate::target_dir(&cargo)?.join(target).join("release/nodewarden");
    if !is_static(&binary)? {
        bail!("{} is dynamically linked; the image has no C library for it", binary.display());
    }
    eprintln!("built {} (static)", binary.display());
    let docker = ["build", "-t", tag.as_str(), "."];
    let engine = Command::new("docker").args(["version", "--format", "{{.Server.Version}}"]).output();
    match engine {
        Ok(o) if o.status.success() => {
            eprintln!("$ docker {}", docker.join(" "));
            let status = Command::new("docker").args(docker).status().context("could not start docker")?;
            if !status.success() {
                bail!("`docker {}` failed ({status})", docker.join(" "));
            }
            eprintln!("built image {tag}");
        }
        Ok(o) => {
            let why = String::from_utf8_lossy(&o.stderr);
            eprintln!(
                "no Docker engine answers here ({}); the binary builds. Build the image where one does:\n  docker {}",
                why.lines().find(|l| !l.trim().is_empty()).unwrap_or("docker version failed").trim(),
                docker.join(" ")
            );
        }
        Err(_) => eprintln!(
            "docker is not installed here; the binary builds. Build the image where it is:\n  docker {}",
            docker.join(" ")
        ),
    }
    Ok(())
}
