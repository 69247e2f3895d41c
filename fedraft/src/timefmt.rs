//! Times as the CLI shows them, the way kubectl does: tables show ages ("5s", "3m12s",
//! "3h12m", "2d") measured against this machine's clock, and `-o wide` shows RFC 3339 in UTC
//! instead. The API hands out log times as milliseconds since the epoch (`...Ms` fields);
//! nothing the CLI prints is such a raw number.
//!
//! Must not: parse anything but RFC 3339 (the same parser the API uses, `audit_wire`).

use std::time::{SystemTime, UNIX_EPOCH};

pub use fedraft_apiserver::audit_wire::{parse_rfc3339, rfc3339};

/// This machine's clock, in ms since the epoch (0 if it is set before 1970).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A duration as kubectl prints an age: two units at most while the second still says
/// something (under 10 minutes, 8 hours, 8 days, 8 years), one unit after that.
pub fn age(ms: u64) -> String {
    const MINUTE: u64 = 60;
    const HOUR: u64 = 60 * MINUTE;
    const DAY: u64 = 24 * HOUR;
    const YEAR: u64 = 365 * DAY;
    let s = ms / 1000;
    let two = |big: u64, big_unit: &str, small: u64, small_unit: &str| {
        if small == 0 {
            format!("{big}{big_unit}")
        } else {
            format!("{big}{big_unit}{small}{small_unit}")
        }
    };
    if s < 2 * MINUTE {
        format!("{s}s")
    } else if s < 10 * MINUTE {
        two(s / MINUTE, "m", s % MINUTE, "s")
    } else if s < 3 * HOUR {
        format!("{}m", s / MINUTE)
    } else if s < 8 * HOUR {
        two(s / HOUR, "h", s % HOUR / MINUTE, "m")
    } else if s < 2 * DAY {
        format!("{}h", s / HOUR)
    } else if s < 8 * DAY {
        two(s / DAY, "d", s % DAY / HOUR, "h")
    } else if s < 2 * YEAR {
        format!("{}d", s / DAY)
    } else if s < 8 * YEAR {
        two(s / YEAR, "y", s % YEAR / DAY, "d")
    } else {
        format!("{}y", s / YEAR)
    }
}

/// How a table shows a point in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Times {
    /// How long ago, measured from `now_ms`.
    Age { now_ms: u64 },
    /// RFC 3339 in UTC.
    Absolute,
}

impl Times {
    /// RFC 3339 for `-o wide`, else ages from this machine's clock.
    pub fn of(wide: bool) -> Times {
        if wide {
            Times::Absolute
        } else {
            Times::Age { now_ms: now_ms() }
        }
    }

    /// `ms` as this style shows it. A time ahead of `now` by more than a second (clocks differ
    /// between machines) is `<invalid>`, as kubectl has it; a smaller lead is `0s`.
    pub fn show(self, ms: u64) -> String {
        match self {
            Times::Absolute => rfc3339(ms),
            Times::Age { now_ms } if ms > now_ms.saturating_add(1000) => "<invalid>".into(),
            Times::Age { now_ms } => age(now_ms.saturating_sub(ms)),
        }
    }

    /// A past moment: "5m ago", or RFC 3339.
    pub fn ago(self, ms: u64) -> String {
        match self {
            Times::Absolute => self.show(ms),
            Times::Age { .. } => format!("{} ago", self.show(ms)),
        }
    }

    /// A phrase for a state that began at `ms`: "for 5m" or "since 2026-...Z".
    pub fn since(self, ms: u64) -> String {
        match self {
            Times::Absolute => format!("since {}", self.show(ms)),
            Times::Age { .. } => format!("for {}", self.show(ms)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        let s = 1000;
        let m = 60 * s;
        let h = 60 * m;
        let d = 24 * h;
        let cases = [
            (0, "0s"),
            (999, "0s"),
            (5 * s, "5s"),
            (119 * s, "119s"),
            (2 * m, "2m"),
            (3 * m + 12 * s, "3m12s"),
            (9 * m + 59 * s, "9m59s"),
            (10 * m + 30 * s, "10m"),
            (179 * m, "179m"),
            (3 * h + 12 * m, "3h12m"),
            (5 * h, "5h"),
            (8 * h + 59 * m, "8h"),
            (47 * h, "47h"),
            (2 * d, "2d"),
            (2 * d + 5 * h, "2d5h"),
            (8 * d, "8d"),
            (729 * d, "729d"),
            (730 * d, "2y"),
            (3 * 365 * d + 40 * d, "3y40d"),
            (9 * 365 * d, "9y"),
        ];
        for (ms, want) in cases {
            assert_eq!(age(ms), want, "{ms} ms");
        }
    }

    #[test]
    fn styles() {
        let now = 1_796_008_302_125;
        let t = Times::Age { now_ms: now };
        assert_eq!(t.show(now - 300_000), "5m");
        assert_eq!(t.since(now - 300_000), "for 5m");
        assert_eq!(t.ago(now - 300_000), "5m ago");
        assert_eq!(t.show(now + 500), "0s");
        assert_eq!(t.show(now + 5_000), "<invalid>");
        assert_eq!(Times::Absolute.show(now), "2026-11-30T03:11:42.125Z");
        assert_eq!(Times::Absolute.since(now), "since 2026-11-30T03:11:42.125Z");
    }
}
