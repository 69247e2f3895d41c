//! The one constant-time comparison of secrets: the peer network's cluster-secret check and the
//! API's bearer-token check both go through [`constant_time_eq`], so there is one comparison to
//! review. It is built on `subtle`, whose comparison the optimizer cannot turn back into an early
//! exit at the first differing byte, as it may a hand-written loop.
//!
//! Must not: log, return or copy the secrets it compares.

use subtle::ConstantTimeEq;

/// Whether `a` equals `b`, in time that does not depend on their contents. Their lengths are
/// not hidden (unequal lengths answer at once): a caller that must hide the length too compares
/// fixed-size digests, as the peer router does.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn equal_only_when_every_byte_and_the_length_match() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(constant_time_eq(b"", b""));
        assert!(!constant_time_eq(b"s3cret", b"s3creT"));
        assert!(!constant_time_eq(b"s3cret", b"s3cret!"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
