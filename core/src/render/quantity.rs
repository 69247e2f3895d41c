//! Kubernetes resource quantities ("500m", "1", "0.5", "256Mi", "1Gi", "1G", "1e3") in integers.
//!
//! Owns: turning a quantity into an integer count of a base unit times a scale (CPU cores to
//! millicores with scale 1000, bytes with scale 1), rounding up as Kubernetes does. No floating
//! point. Must not: know which field a quantity came from.

/// Parses `text` and returns `value * scale`, rounded up to an integer.
pub fn parse_quantity(text: &str, scale: u64) -> Result<u64, String> {
    let s = text.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.starts_with('-') {
        return Err(format!("{text:?} is negative"));
    }
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(num_end);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(format!("{text:?} has no digits"));
    }
    if frac_part.contains('.') {
        return Err(format!("{text:?} has two decimal points"));
    }
    let digits = format!("{int_part}{frac_part}");
    if digits.len() > 30 {
        return Err(format!("{text:?} has too many digits"));
    }
    let mantissa: u128 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    // value = mantissa * mul / div
    let mut mul: u128 = 1;
    let mut div: u128 = 10u128.pow(frac_part.len() as u32);
    let pow10 = |e: u32| {
        10u128
            .checked_pow(e)
            .ok_or_else(|| format!("{text:?} is too large"))
    };
    match suffix {
        "" => {}
        "Ki" => mul = 1 << 10,
        "Mi" => mul = 1 << 20,
        "Gi" => mul = 1 << 30,
        "Ti" => mul = 1 << 40,
        "Pi" => mul = 1 << 50,
        "Ei" => mul = 1 << 60,
        "n" => div *= 1_000_000_000,
        "u" => div *= 1_000_000,
        "m" => div *= 1_000,
        "k" => mul = 1_000,
        "M" => mul = 1_000_000,
        "G" => mul = 1_000_000_000,
        "T" => mul = pow10(12)?,
        "P" => mul = pow10(15)?,
        "E" => mul = pow10(18)?,
        exp if exp.starts_with(['e', 'E']) => {
            let e: i32 = exp[1..]
                .parse()
                .map_err(|_| format!("{text:?} has a bad exponent"))?;
            if e.unsigned_abs() > 30 {
                return Err(format!("{text:?} exponent out of range"));
            }
            if e >= 0 {
                mul = pow10(e as u32)?;
            } else {
                div = div
                    .checked_mul(pow10(e.unsigned_abs())?)
                    .ok_or_else(|| format!("{text:?} is too small"))?;
            }
        }
        other => return Err(format!("{text:?} has an unknown suffix {other:?}")),
    }
    let top = mantissa
        .checked_mul(mul)
        .and_then(|v| v.checked_mul(u128::from(scale)))
        .ok_or_else(|| format!("{text:?} is too large"))?;
    let value = top.div_ceil(div);
    u64::try_from(value).map_err(|_| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::parse_quantity;

    #[test]
    fn cpu_in_millis() {
        for (q, want) in [
            ("500m", 500),
            ("1", 1000),
            ("0.5", 500),
            ("2.25", 2250),
            ("1e3", 1_000_000),
            ("100u", 1),
            (".1", 100),
            ("1k", 1_000_000),
        ] {
            assert_eq!(parse_quantity(q, 1000), Ok(want), "{q}");
        }
    }

    #[test]
    fn memory_in_bytes() {
        for (q, want) in [
            ("256Mi", 256 << 20),
            ("1Gi", 1 << 30),
            ("1G", 1_000_000_000),
            ("1e3", 1000),
            ("128974848", 128_974_848),
            ("129M", 129_000_000),
            ("1.5Gi", 3 << 29),
            ("1500m", 2),
        ] {
            assert_eq!(parse_quantity(q, 1), Ok(want), "{q}");
        }
    }

    #[test]
    fn rejects_bad_input() {
        for q in [
            "",
            "-1",
            "1x",
            "1.2.3",
            "Mi",
            "1e",
            "1e99",
            "99999999999999999999Ei",
        ] {
            assert!(parse_quantity(q, 1).is_err(), "{q}");
        }
    }
}
