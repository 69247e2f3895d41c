//! Object metadata: the generic helpers come from `fedraft_kubeapi::meta` (names, labels, the
//! no-op comparison); this module adds what needs the clock or randomness, which the pure
//! library must not read: creation timestamps and uids. No storage, no HTTP.

pub use fedraft_kubeapi::meta::*;

/// RFC 3339 with whole seconds, as Kubernetes writes `metav1.Time`.
pub fn now_rfc3339() -> String {
    let ts = jiff::Timestamp::now();
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Now in Unix seconds, the `now` of table ages.
pub fn now_unix() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// A random version-4 UUID in its usual text form.
pub fn new_uid() -> String {
    let b: [u8; 16] = rand::random();
    let hex = |s: &[u8]| s.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let mut v = b;
    v[6] = (v[6] & 0x0f) | 0x40;
    v[8] = (v[8] & 0x3f) | 0x80;
    format!(
        "{}-{}-{}-{}-{}",
        hex(&v[0..4]),
        hex(&v[4..6]),
        hex(&v[6..8]),
        hex(&v[8..10]),
        hex(&v[10..16])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_shape() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }
}
