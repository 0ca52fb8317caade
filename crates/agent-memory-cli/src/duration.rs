//! `--expires-in` durations such as `90s`, `15m`, `1h30m`, `7d` or `2w`.
//!
//! Hand-written rather than a dependency: the grammar is one loop, and owning it lets the
//! error say exactly which units exist.

use std::time::Duration;

use agent_memory::validation::MAX_EXPIRES_IN_SECONDS;

/// Parses one or more `<number><unit>` parts, units `s`, `m`, `h`, `d`, `w`; the parts add up.
///
/// A bare number is refused: `--expires-in 30` could mean seconds or minutes, and guessing
/// wrong silently loses memories.
///
/// # Errors
/// A sentence for clap to show when the text is empty, has a number without a unit, an unknown
/// unit, overflows, adds up to zero, or is longer than
/// [`MAX_EXPIRES_IN_SECONDS`] (ten years, the memory tools' limit too).
pub fn parse(text: &str) -> Result<Duration, String> {
    const HINT: &str = "use a number and a unit (s, m, h, d, w), for example 90s, 1h30m or 7d";
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: u64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(format!("unknown unit in duration: {HINT}")),
        };
        if digits.is_empty() {
            return Err(format!("a unit without a number: {HINT}"));
        }
        let amount: u64 = digits.parse().map_err(|_| "duration is too long".to_owned())?;
        digits.clear();
        total = amount
            .checked_mul(unit)
            .and_then(|seconds| total.checked_add(seconds))
            .ok_or_else(|| "duration is too long".to_owned())?;
    }
    if !digits.is_empty() {
        return Err(format!("a number without a unit: {HINT}"));
    }
    if total == 0 {
        return Err(format!("duration must be longer than zero: {HINT}"));
    }
    if total > MAX_EXPIRES_IN_SECONDS {
        return Err(format!(
            "duration is longer than ten years ({MAX_EXPIRES_IN_SECONDS}s), the longest expiry \
             (the memory tools have the same limit)"
        ));
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_sums_parts() {
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse("2w1s"), Ok(Duration::from_secs(1_209_601)));
        assert_eq!(parse("3650d"), Ok(Duration::from_secs(MAX_EXPIRES_IN_SECONDS)));
        assert!(parse("3650d1s").expect_err("too long").contains("ten years"));
    }

    #[test]
    fn refuses_ambiguous_or_empty_durations() {
        for bad in ["", "30", "h", "1x", "0s", "1.5h", "-1h", "99999999999999999999s", "100000w"] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
