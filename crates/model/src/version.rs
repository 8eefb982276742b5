//! Which Kubernetes a configuration stands in for.
//!
//! kube-controller-manager's defaults moved once among the flags nodewarden
//! takes (`node-monitor-grace-period`, 40 s to 50 s in 1.32), so a what-if
//! on a snapshot of an older cluster must play that cluster's defaults,
//! not today's. The version is read the way clusters report it: `/version`
//! (`major: "1"`, `minor: "31+"`, `gitVersion: "v1.31.4-gke.1000"`) or a
//! flag (`1.31`, `v1.31.4`).

use std::fmt;
use std::str::FromStr;

/// A Kubernetes minor version (the patch level changes no default).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    /// Always 1 so far.
    pub major: u16,
    /// The minor release, `31` of `v1.31.4`.
    pub minor: u16,
}

/// A version string that names no Kubernetes release.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a Kubernetes version; expected MAJOR.MINOR as in 1.33 or v1.33.2")]
pub struct VersionParseError(pub String);

impl KubeVersion {
    /// The oldest release nodewarden supports (docs/operations.md), whose
    /// kube-controller-manager `nodewarden run`'s defaults are.
    pub const OLDEST_SUPPORTED: KubeVersion = KubeVersion::new(1, 33);

    /// `major.minor`.
    pub const fn new(major: u16, minor: u16) -> KubeVersion {
        KubeVersion { major, minor }
    }

    /// Reads `/version`'s `major` and `minor` fields; providers append a
    /// `+` to the minor (`"31+"`), which is dropped.
    pub fn from_info(major: &str, minor: &str) -> Result<KubeVersion, VersionParseError> {
        let bad = || VersionParseError(format!("{major}.{minor}"));
        let minor = minor.trim_end_matches('+');
        Ok(KubeVersion { major: major.parse().map_err(|_| bad())?, minor: minor.parse().map_err(|_| bad())? })
    }
}

impl FromStr for KubeVersion {
    type Err = VersionParseError;

    /// `1.33`, `v1.33`, `v1.33.2`, `v1.31.4-gke.1000`: the patch level and
    /// anything after it are ignored.
    fn from_str(s: &str) -> Result<KubeVersion, VersionParseError> {
        let bad = || VersionParseError(s.to_string());
        let rest = s.strip_prefix('v').unwrap_or(s);
        let mut parts = rest.splitn(3, '.');
        let major = parts.next().ok_or_else(bad)?;
        let minor = parts.next().ok_or_else(bad)?;
        // The minor ends at the first non-digit (`33-rc.1`, `33+`).
        let digits = minor.find(|c: char| !c.is_ascii_digit()).unwrap_or(minor.len());
        if digits == 0 || (digits < minor.len() && parts.next().is_some()) {
            return Err(bad());
        }
        Ok(KubeVersion { major: major.parse().map_err(|_| bad())?, minor: minor[..digits].parse().map_err(|_| bad())? })
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_as_clusters_and_people_write_them() {
        let v = |s: &str| s.parse::<KubeVersion>();
        assert_eq!(v("1.33"), Ok(KubeVersion::new(1, 33)));
        assert_eq!(v("v1.31.4"), Ok(KubeVersion::new(1, 31)));
        assert_eq!(v("v1.31.4-gke.1000"), Ok(KubeVersion::new(1, 31)));
        assert_eq!(v("v1.34.0-rc.1"), Ok(KubeVersion::new(1, 34)));
        for bad in ["", "1", "v", "one.two", "1.", "1.x", "1.3a.2", "-1.30"] {
            assert_eq!(v(bad), Err(VersionParseError(bad.to_string())), "{bad:?}");
        }
        assert_eq!(KubeVersion::from_info("1", "31+"), Ok(KubeVersion::new(1, 31)));
        assert!(KubeVersion::from_info("1", "").is_err());
        assert!(KubeVersion::new(1, 9) < KubeVersion::new(1, 32));
        assert_eq!(KubeVersion::new(1, 32).to_string(), "1.32");
    }
}
