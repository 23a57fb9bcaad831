//! The text forms of options that the CLI and the GUI both read: sizes
//! such as `5GB` or `5GiB`, and `FROM=TO` pairs (renames, metadata,
//! dtype conversions), so that both faces accept the same text and say the
//! same thing about a mistake.

/// A `FROM=TO` option without its `=`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{option} takes {form}, got {text:?}")]
pub struct PairError {
    /// How the message names the option: `--rename` on the command line,
    /// `a rename` in the GUI.
    pub option: String,
    /// The form it takes, as the message shows it (`FROM=TO`, `K=V`).
    pub form: String,
    /// The text as given.
    pub text: String,
}

/// Splits `FROM=TO` at its first `=` (so `TO` may contain `=`; either side
/// may be empty). `option` and `form` only word the error: `--rename` and
/// `FROM=TO` give `--rename takes FROM=TO, got "x"`.
pub fn parse_pair<'t>(
    text: &'t str,
    option: &str,
    form: &str,
) -> Result<(&'t str, &'t str), PairError> {
    text.split_once('=').ok_or_else(|| PairError {
        option: option.to_owned(),
        form: form.to_owned(),
        text: text.to_owned(),
    })
}

/// Parses a size: `5GB` (5·10^9), `5GiB` (5·2^30), `1.5MB`, `500kB` or a
/// plain byte count. Units: B, kB/KB, MB, GB, TB (powers of 1000), KiB, MiB,
/// GiB, TiB (powers of 1024); case-insensitive. Fractions round down to
/// whole bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let unit_bytes: u128 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        other => {
            return Err(format!(
                "unknown size unit {other:?} in {text:?} (use B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)"
            ));
        }
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let bad = || format!("{text:?} is not a size (such as 5GB, 5GiB or 1000000)");
    if whole.is_empty() && frac.is_empty() || frac.contains('.') || frac.len() > 18 {
        return Err(bad());
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let frac_value: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse().map_err(|_| bad())?
    };
    let scale = 10u128.pow(frac.len() as u32);
    let bytes = whole
        .checked_mul(unit_bytes)
        .and_then(|w| w.checked_add(frac_value * unit_bytes / scale))
        .ok_or_else(|| format!("{text:?} is too large"))?;
    u64::try_from(bytes).map_err(|_| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_split_at_the_first_equals_sign() {
        assert_eq!(parse_pair("a=b=c", "--meta", "K=V"), Ok(("a", "b=c")));
        assert_eq!(parse_pair("=", "--meta", "K=V"), Ok(("", "")));
        let e = parse_pair("ab", "--rename", "FROM=TO").expect_err("no =");
        assert_eq!(e.to_string(), "--rename takes FROM=TO, got \"ab\"");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("5GB"), Ok(5_000_000_000));
        assert_eq!(parse_size("5GiB"), Ok(5 << 30));
        assert_eq!(parse_size("5gib"), Ok(5 << 30));
        assert_eq!(parse_size("123"), Ok(123));
        assert_eq!(parse_size("1.5MB"), Ok(1_500_000));
        assert_eq!(parse_size("0.5KiB"), Ok(512));
        assert_eq!(parse_size("10 kB"), Ok(10_000));
        assert_eq!(parse_size("2TiB"), Ok(2 << 40));
        for bad in [
            "",
            "GB",
            "5XB",
            "-5",
            "1.2.3MB",
            ".",
            "99999999999999999999TB",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }
}
