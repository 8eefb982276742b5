//! Object names kept inline when they are short.
//!
//! A map keyed by `String` finds its entry, then follows the key's pointer
//! to compare the name: at 100k nodes, a lookup per Lease renewal, that
//! second memory access is a cache miss of its own. [`CompactName`] keeps
//! a name of up to [`CompactName::INLINE`] bytes (node names usually are)
//! in the key itself, and a longer one on the heap as before.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};

use arrayvec::ArrayString;

/// A name, inline when short. It hashes, compares and orders as the `str`
/// it holds, and borrows as one, so a `HashMap<CompactName, V>` is looked
/// up with a `&str`.
///
/// The inline form is an [`ArrayString`]: it hands out its `&str` without
/// checking the UTF-8 again. A map lookup borrows the key at least twice
/// (to hash and to compare), once per renewal at 100k nodes, and a
/// `str::from_utf8` of the bytes each time was 4% of a simulated hour.
#[derive(Clone)]
pub enum CompactName {
    /// Up to [`CompactName::INLINE`] bytes, in place.
    Inline(ArrayString<{ CompactName::INLINE }>),
    /// A longer name.
    Heap(Box<str>),
}

impl CompactName {
    /// The longest name kept inline (node names usually are shorter).
    pub const INLINE: usize = 22;

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        match self {
            CompactName::Inline(s) => s.as_str(),
            CompactName::Heap(s) => s,
        }
    }

    /// The name's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.as_str().as_bytes()
    }
}

impl From<&str> for CompactName {
    fn from(s: &str) -> Self {
        match ArrayString::from(s) {
            Ok(inline) => CompactName::Inline(inline),
            Err(_) => CompactName::Heap(s.into()),
        }
    }
}

impl From<&String> for CompactName {
    fn from(s: &String) -> Self {
        CompactName::from(s.as_str())
    }
}

impl From<String> for CompactName {
    fn from(s: String) -> Self {
        if s.len() <= CompactName::INLINE { CompactName::from(s.as_str()) } else { CompactName::Heap(s.into()) }
    }
}

impl Borrow<str> for CompactName {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for CompactName {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for CompactName {}

impl PartialOrd for CompactName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CompactName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl Hash for CompactName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `str` hashes, so that `Borrow<str>` lookups find it.
        self.as_str().hash(state);
    }
}

impl fmt::Debug for CompactName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for CompactName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Default for CompactName {
    fn default() -> Self {
        CompactName::from("")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn short_names_inline_long_ones_on_the_heap_and_both_behave_as_str() {
        let short = CompactName::from("node-000123");
        let edge = CompactName::from("x".repeat(CompactName::INLINE).as_str());
        let long = CompactName::from("ip-10-0-1-23.eu-west-1.compute.internal".to_string());
        assert!(matches!(short, CompactName::Inline(ref s) if s.len() == 11));
        assert!(matches!(edge, CompactName::Inline(_)));
        assert!(matches!(long, CompactName::Heap(_)));
        assert_eq!(short.as_str(), "node-000123");
        assert_eq!(long.to_string(), "ip-10-0-1-23.eu-west-1.compute.internal");
        assert!(std::mem::size_of::<CompactName>() <= 32);
        let mut map = HashMap::new();
        for n in ["", "é-node", "node-000123", "ip-10-0-1-23.eu-west-1.compute.internal"] {
            map.insert(CompactName::from(n), n.len());
        }
        for n in ["", "é-node", "node-000123", "ip-10-0-1-23.eu-west-1.compute.internal"] {
            assert_eq!(map.get(n), Some(&n.len()), "{n}");
        }
        assert_eq!(map.get("node-00012"), None);
        assert!(CompactName::from("a") < CompactName::from("b".repeat(40)));
        assert_eq!(CompactName::from("abc"), CompactName::from("abc".to_string()));
    }
}
