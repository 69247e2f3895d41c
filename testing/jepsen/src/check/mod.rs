//! Checkers that judge a recorded history: [`register`] (linearizability of per-key registers, built on the
//! generic search in [`wgl`]) and [`set`] (no lost and no phantom elements); and checkers of what the harness
//! observed around it: [`convergence`] (member clusters hold what placement says), [`agreement`] (equal state
//! hashes at equal indexes), [`clock`] (log time monotonic and sane, no false NotReady), [`leadership`]
//! (term changes within a bound, for the slow-link nemesis), and [`floor`] (a workload's ready replicas over
//! members not dark never below the floor a rollout or drain promises, and no member running a template
//! revision the log did not roll out to it). Checkers are pure
//! functions of their inputs; they never contact fedraft. Start with [`register::check_registers`] and
//! [`set::check_sets`].

pub mod agreement;
pub mod clock;
pub mod convergence;
pub mod floor;
pub mod leadership;
pub mod register;
pub mod set;
pub mod wgl;

use serde::Serialize;

/// A checker's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// The property holds.
    Valid,
    /// The property is violated; `description` says where and how.
    Invalid { description: String },
    /// The checker could not decide within its limits (or lacked the data); never read it as a pass.
    Unknown { reason: String },
}

impl Verdict {
    pub fn is_valid(&self) -> bool {
        matches!(self, Verdict::Valid)
    }

    /// Invalid if any part is invalid, else unknown if any is unknown, else valid. Descriptions are joined.
    pub fn combine<'a>(parts: impl IntoIterator<Item = &'a Verdict>) -> Verdict {
        let mut invalid = Vec::new();
        let mut unknown = Vec::new();
        for part in parts {
            match part {
                Verdict::Valid => {}
                Verdict::Invalid { description } => invalid.push(description.as_str()),
                Verdict::Unknown { reason } => unknown.push(reason.as_str()),
            }
        }
        if !invalid.is_empty() {
            Verdict::Invalid {
                description: invalid.join("\n"),
            }
        } else if !unknown.is_empty() {
            Verdict::Unknown {
                reason: unknown.join("\n"),
            }
        } else {
            Verdict::Valid
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_prefers_invalid_then_unknown() {
        let v = Verdict::Valid;
        let u = Verdict::Unknown {
            reason: "slow".into(),
        };
        let i = Verdict::Invalid {
            description: "lost".into(),
        };
        assert_eq!(Verdict::combine([&v, &v]), Verdict::Valid);
        assert_eq!(Verdict::combine([&v, &u]), u);
        assert_eq!(Verdict::combine([&u, &i, &v]), i);
        assert_eq!(Verdict::combine([]), Verdict::Valid);
    }
}
