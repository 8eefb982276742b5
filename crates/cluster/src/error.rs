//! Why a scenario was refused: the field path, the YAML position when known,
//! and what is wrong.

use std::fmt;
use std::path::PathBuf;

/// A position in the scenario text (1-based), for errors a reader fixes by
/// going to that line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// Why a scenario cannot be replayed. Every variant names where to look:
/// the file, or the field path (`events[3].set-ready.status`, indices from
/// 0) and, for what the YAML reader caught, the line and column.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("cannot read {}: {cause}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        cause: std::io::Error,
    },
    /// The text is not a scenario: YAML syntax, a wrong type, an unknown
    /// field, a malformed duration, an event with two actions...
    #[error("{}", describe(.path, .location.as_ref(), .message))]
    Parse {
        /// The field path; `.` for the document itself.
        path: String,
        /// Where in the text, when the reader knew.
        location: Option<Location>,
        /// What is wrong.
        message: String,
    },
    /// Well-formed, but inconsistent: a duplicate name, an event naming a
    /// node defined nowhere, a flag value that cannot work...
    #[error("{path}: {message}")]
    Invalid {
        /// The field path.
        path: String,
        /// What is wrong.
        message: String,
    },
}

impl ScenarioError {
    /// An [`ScenarioError::Invalid`] at `path`.
    pub(crate) fn invalid(path: impl Into<String>, message: impl Into<String>) -> ScenarioError {
        ScenarioError::Invalid { path: path.into(), message: message.into() }
    }

    /// The field path the error is about, when there is one.
    pub fn path(&self) -> Option<&str> {
        match self {
            ScenarioError::Read { .. } => None,
            ScenarioError::Parse { path, .. } | ScenarioError::Invalid { path, .. } => Some(path),
        }
    }

    /// The position in the text, when known.
    pub fn location(&self) -> Option<Location> {
        match self {
            ScenarioError::Parse { location, .. } => *location,
            _ => None,
        }
    }

    /// Converts what the YAML reader reported, keeping the path that
    /// `serde_path_to_error` tracked and the reader's line and column, and
    /// dropping the copies of both that the reader writes into its message.
    pub(crate) fn from_yaml(err: serde_path_to_error::Error<serde_yaml_ng::Error>) -> ScenarioError {
        // Broken YAML (bad indentation) stops the tracker before it knows
        // the next key: it writes `?` for it, which says nothing; the
        // enclosing path, and the line and column, do.
        let mut path = err.path().to_string();
        while let Some(parent) = path.strip_suffix(".?") {
            path = parent.to_string();
        }
        if path == "?" {
            path = ".".to_string();
        }
        let inner = err.into_inner();
        let location = inner.location().map(|l| Location { line: l.line(), column: l.column() });
        let mut message = inner.to_string();
        if let Some(l) = &location {
            message = message.replacen(&format!(" at line {} column {}", l.line, l.column), "", 1);
        }
        // The reader prefixes its own path, which is the tracked one or an
        // ancestor of it (for unknown fields, the enclosing mapping).
        if let Some((prefix, rest)) = message.split_once(": ")
            && !prefix.is_empty()
            && !prefix.contains(' ')
            && path.starts_with(prefix)
        {
            message = rest.to_string();
        }
        ScenarioError::Parse { path, location, message }
    }
}

fn describe(path: &str, location: Option<&Location>, message: &str) -> String {
    let root = path.is_empty() || path == ".";
    match (root, location) {
        (true, Some(l)) => format!("{l}: {message}"),
        (true, None) => message.to_string(),
        (false, Some(l)) => format!("{path} ({l}): {message}"),
        (false, None) => format!("{path}: {message}"),
    }
}
