//! Resource amounts (CPU, memory, pod slots) and Kubernetes quantity
//! parsing, for the critical-addon rescheduler's fit checks.
//!
//! Amounts are integers in the scheduler's own units: CPU in millicores,
//! memory in bytes, rounded up as `Quantity.MilliValue()` / `Value()` do,
//! so a pod never looks smaller than the scheduler sees it.

use std::fmt;
use std::ops::{Add, AddAssign};

/// CPU, memory and pod slots: a pod's requests (one slot) or a node's
/// allocatable capacity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resources {
    /// Millicores.
    pub cpu_millis: u64,
    /// Bytes.
    pub memory_bytes: u64,
    /// Pod slots (`pods` allocatable; 1 for a pod's requests).
    pub pods: u64,
}

impl Resources {
    /// Nothing at all.
    pub const ZERO: Resources = Resources { cpu_millis: 0, memory_bytes: 0, pods: 0 };

    /// A pod's requests: these amounts and one pod slot.
    pub fn pod(cpu_millis: u64, memory_bytes: u64) -> Resources {
        Resources { cpu_millis, memory_bytes, pods: 1 }
    }

    /// `self` fits in `free` in every dimension.
    pub fn fits_in(&self, free: &Resources) -> bool {
        self.cpu_millis <= free.cpu_millis && self.memory_bytes <= free.memory_bytes && self.pods <= free.pods
    }

    /// What is left of `self` after `used`, never below zero.
    pub fn saturating_sub(&self, used: &Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.saturating_sub(used.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_sub(used.memory_bytes),
            pods: self.pods.saturating_sub(used.pods),
        }
    }

    /// The amounts by which `self` exceeds `free` (zero where it fits): how
    /// much has to be freed for `self` to fit.
    pub fn shortfall(&self, free: &Resources) -> Resources {
        self.saturating_sub(free)
    }
}

impl Add for Resources {
    type Output = Resources;
    fn add(self, o: Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.saturating_add(o.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_add(o.memory_bytes),
            pods: self.pods.saturating_add(o.pods),
        }
    }
}

impl AddAssign for Resources {
    fn add_assign(&mut self, o: Resources) {
        *self = *self + o;
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cpu {}m, memory {}, pods {}", self.cpu_millis, Bytes(self.memory_bytes), self.pods)
    }
}

/// Bytes in the largest binary unit that keeps the number whole.
struct Bytes(u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (suffix, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
            if self.0 != 0 && self.0.is_multiple_of(1 << shift) {
                return write!(f, "{}{suffix}", self.0 >> shift);
            }
        }
        write!(f, "{}", self.0)
    }
}

/// Why a quantity string could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quantity {text:?}: {problem}")]
pub struct QuantityError {
    /// The text as given.
    pub text: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

/// A parsed quantity: `mantissa / 10^frac_digits * 10^exp10 * 2^exp2`.
struct Quantity {
    mantissa: u128,
    frac_digits: u32,
    exp10: i32,
    exp2: u32,
}

fn parse(text: &str) -> Result<Quantity, QuantityError> {
    let err = |problem| QuantityError { text: text.to_string(), problem };
    let s = text.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.starts_with('-') {
        return Err(err("negative amounts are not allowed"));
    }
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, suffix) = s.split_at(end);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() {
        return Err(err("no number"));
    }
    if frac.contains('.') {
        return Err(err("more than one decimal point"));
    }
    let mut mantissa: u128 = 0;
    for d in whole.bytes().chain(frac.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(u128::from(d - b'0')))
            .ok_or_else(|| err("too many digits"))?;
    }
    let frac_digits = u32::try_from(frac.len()).map_err(|_| err("too many digits"))?;
    let (exp10, exp2) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        e if e.starts_with(['e', 'E']) => {
            let exp: i32 = e[1..].parse().map_err(|_| err("unknown suffix"))?;
            if !(-30..=30).contains(&exp) {
                return Err(err("exponent out of range"));
            }
            (exp, 0)
        }
        _ => return Err(err("unknown suffix (expected n, u, m, k, M, G, T, P, E, Ki .. Ei or an exponent)")),
    };
    Ok(Quantity { mantissa, frac_digits, exp10, exp2 })
}

/// The quantity times `scale`, rounded up to a whole number.
fn scaled_ceil(text: &str, scale: u128) -> Result<u64, QuantityError> {
    let q = parse(text)?;
    let too_large = || QuantityError { text: text.to_string(), problem: "too large" };
    let mut num = q.mantissa.checked_mul(scale).ok_or_else(too_large)?;
    num = num.checked_shl(q.exp2).filter(|n| n >> q.exp2 == num).ok_or_else(too_large)?;
    let mut den: u128 = 1;
    let down = i64::from(q.frac_digits) - i64::from(q.exp10);
    if down >= 0 {
        for _ in 0..down {
            den = den.checked_mul(10).ok_or_else(too_large)?;
        }
    } else {
        for _ in 0..(-down) {
            num = num.checked_mul(10).ok_or_else(too_large)?;
        }
    }
    u64::try_from(num.div_ceil(den)).map_err(|_| too_large())
}

/// A CPU quantity (`100m`, `0.5`, `2`) in millicores, rounded up.
pub fn parse_cpu_millis(text: &str) -> Result<u64, QuantityError> {
    scaled_ceil(text, 1000)
}

/// A memory (or any plain) quantity (`128Mi`, `1G`, `1e9`) in whole units,
/// rounded up.
pub fn parse_bytes(text: &str) -> Result<u64, QuantityError> {
    scaled_ceil(text, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_quantities() {
        assert_eq!(parse_cpu_millis("100m"), Ok(100));
        assert_eq!(parse_cpu_millis("0.5"), Ok(500));
        assert_eq!(parse_cpu_millis("2"), Ok(2000));
        assert_eq!(parse_cpu_millis(".25"), Ok(250));
        assert_eq!(parse_cpu_millis("1500u"), Ok(2), "rounded up, as MilliValue does");
        assert_eq!(parse_cpu_millis("1e3"), Ok(1_000_000));
        assert_eq!(parse_cpu_millis("0"), Ok(0));
    }

    #[test]
    fn memory_quantities() {
        assert_eq!(parse_bytes("128Mi"), Ok(128 << 20));
        assert_eq!(parse_bytes("1Gi"), Ok(1 << 30));
        assert_eq!(parse_bytes("1G"), Ok(1_000_000_000));
        assert_eq!(parse_bytes("1.5Ki"), Ok(1536));
        assert_eq!(parse_bytes("100"), Ok(100));
        assert_eq!(parse_bytes("1e6"), Ok(1_000_000));
        assert_eq!(parse_bytes("500m"), Ok(1), "a fraction of a byte rounds up");
    }

    #[test]
    fn bad_quantities_are_named() {
        for bad in ["", "abc", "1x", "-1", "1.2.3", "1Qi", "99999999999999999999999999999999999999999Ei", "1e99"] {
            let e = parse_bytes(bad).expect_err(bad);
            assert_eq!(e.text, bad);
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn fit_and_shortfall() {
        let free = Resources { cpu_millis: 500, memory_bytes: 1 << 30, pods: 3 };
        let small = Resources::pod(100, 1 << 20);
        let big = Resources::pod(600, 1 << 20);
        assert!(small.fits_in(&free));
        assert!(!big.fits_in(&free));
        assert_eq!(big.shortfall(&free), Resources { cpu_millis: 100, memory_bytes: 0, pods: 0 });
        assert_eq!(format!("{}", Resources::pod(250, 128 << 20)), "cpu 250m, memory 128Mi, pods 1");
    }
}
