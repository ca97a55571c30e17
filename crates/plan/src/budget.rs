//! A byte budget, and how it is written: `64MiB`, `1.5GB`, `1000000`.

use std::fmt;
use std::str::FromStr;

use crate::PlanError;

/// A device-memory budget in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Budget(usize);

impl Budget {
    pub fn bytes(n: usize) -> Budget {
        Budget(n)
    }

    pub fn bytes_value(self) -> usize {
        self.0
    }
}

/// The units a budget may carry: decimal (`KB`, `MB`, `GB`, `TB`) and binary (`KiB`,
/// `MiB`, `GiB`, `TiB`), case-insensitive, and `B` or none for bytes.
const UNITS: [(&str, f64); 9] = [
    ("b", 1.0),
    ("kb", 1e3),
    ("mb", 1e6),
    ("gb", 1e9),
    ("tb", 1e12),
    ("kib", 1024.0),
    ("mib", 1048576.0),
    ("gib", 1073741824.0),
    ("tib", 1099511627776.0),
];

impl FromStr for Budget {
    type Err = PlanError;

    /// `64MiB`, `1.5GB`, `1000000`. A count of bytes (no unit, or `B`) is a whole number;
    /// with a larger unit a fraction is allowed and the bytes round down (`1.1KiB` is 1126).
    fn from_str(s: &str) -> Result<Budget, PlanError> {
        let t = s.trim();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let bad = || {
            PlanError::Invalid(format!(
                "budget `{s}`: expected a number of bytes with an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), such as 64MiB or 1.5GB"
            ))
        };
        let unit = unit.trim().to_ascii_lowercase();
        let scale = if unit.is_empty() { 1.0 } else { UNITS.iter().find(|(u, _)| *u == unit).ok_or_else(bad)?.1 };
        let too_large =
            || PlanError::Invalid(format!("budget `{s}`: more bytes than a {}-bit address holds", usize::BITS));
        if scale == 1.0 {
            if num.contains('.') && num.parse::<f64>().is_ok() {
                return Err(PlanError::Invalid(format!("budget `{s}`: a count of bytes is a whole number")));
            }
            if !num.is_empty() && num.bytes().all(|b| b.is_ascii_digit()) {
                return num.parse::<usize>().map(Budget).map_err(|_| too_large());
            }
            return Err(bad());
        }
        let value: f64 = num.parse().map_err(|_| bad())?;
        let bytes = value * scale;
        if !bytes.is_finite() || bytes >= usize::MAX as f64 {
            return Err(too_large());
        }
        Ok(Budget(bytes as usize))
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes ({})", self.0, human(self.0))
    }
}

/// `12.50 MiB`: a byte count in binary units for people.
pub fn human(bytes: usize) -> String {
    let b = bytes as f64;
    if b >= 1073741824.0 {
        format!("{:.2} GiB", b / 1073741824.0)
    } else if b >= 1048576.0 {
        format!("{:.2} MiB", b / 1048576.0)
    } else if b >= 1024.0 {
        format!("{:.2} KiB", b / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_with_units() {
        let b = |s: &str| s.parse::<Budget>().map(Budget::bytes_value);
        assert_eq!(b("64MiB").unwrap(), 64 << 20);
        assert_eq!(b("1.5GB").unwrap(), 1_500_000_000);
        assert_eq!(b("1000000").unwrap(), 1_000_000);
        assert_eq!(b("12 kib").unwrap(), 12 * 1024);
        assert_eq!(b("7B").unwrap(), 7);
        assert_eq!(b("1.1KiB").unwrap(), 1126);
        assert_eq!(b("18446744073709551615").unwrap(), usize::MAX);
        for bad in ["", "MiB", "12 parsecs", "1.2.3GB", "-5", "1e3", "nan", "inf", "1.2.3"] {
            let e = b(bad).unwrap_err().to_string();
            assert!(e.contains("expected a number of bytes"), "{bad}: {e}");
        }
        for fraction in ["0.5", "1.5B", "1000.0"] {
            let e = b(fraction).unwrap_err().to_string();
            assert!(e.contains("a count of bytes is a whole number"), "{fraction}: {e}");
        }
        for huge in ["18446744073709551616", "99999999999999999999999", "16EiB0", "20000000TiB"] {
            let e = b(huge).unwrap_err().to_string();
            assert!(e.contains("more bytes than") || e.contains("expected a number"), "{huge}: {e}");
        }
    }
}
