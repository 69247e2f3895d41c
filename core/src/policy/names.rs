//! Name and pointer checks shared by the spec validators: DNS-1123 labels, Kubernetes label
//! keys and values, JSON pointers. Must not: know which spec a name belongs to; callers pass
//! the field path to report.

use crate::error::FieldError;

/// A DNS-1123 label: 1 to 63 of `[a-z0-9-]`, starting and ending alphanumeric.
pub fn validate_dns_label(name: &str, field: &str) -> Result<(), FieldError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!("{name:?} is not a DNS-1123 label"),
        ))
    }
}

/// A DNS-1123 subdomain: dot-separated DNS labels, at most 253 bytes in all.
pub fn validate_dns_subdomain(name: &str, field: &str) -> Result<(), FieldError> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .split('.')
            .all(|part| validate_dns_label(part, field).is_ok());
    if ok {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!("{name:?} is not a DNS-1123 subdomain"),
        ))
    }
}

/// A Kubernetes label key: optional DNS prefix and `/`, then a name of 1 to 63 characters.
pub fn validate_label_key(key: &str, field: &str) -> Result<(), FieldError> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    });
    if prefix_ok && !name.is_empty() && is_label_value(name) {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!("{key:?} is not a valid label key"),
        ))
    }
}

/// A Kubernetes label value: empty, or up to 63 of `[A-Za-z0-9-_.]`, alphanumeric at both ends.
pub fn validate_label_value(value: &str, field: &str) -> Result<(), FieldError> {
    if is_label_value(value) {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!("{value:?} is not a valid label value"),
        ))
    }
}

fn is_label_value(v: &str) -> bool {
    if v.is_empty() {
        return true;
    }
    let b = v.as_bytes();
    v.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

pub(crate) fn validate_pointer(pointer: &str, field: &str) -> Result<(), FieldError> {
    if pointer.is_empty() || pointer.starts_with('/') {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!("{pointer:?} is not a JSON pointer (must start with '/')"),
        ))
    }
}
