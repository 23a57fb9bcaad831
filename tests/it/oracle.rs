//! The official `safetensors` crate as the oracle: its verdict on bytes.

use std::panic::{AssertUnwindSafe, catch_unwind};

/// What the reference said of a file image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefVerdict {
    /// Loaded.
    Ok,
    /// Rejected with this error kind (the variant name).
    Err(String),
    /// Panicked (it does in debug builds on some overflowing inputs).
    Panic,
}

/// Runs the reference reader on `bytes`.
pub fn reference(bytes: &[u8]) -> RefVerdict {
    match catch_unwind(AssertUnwindSafe(|| {
        safetensors::SafeTensors::read_metadata(bytes)
    })) {
        Ok(Ok(_)) => RefVerdict::Ok,
        Ok(Err(e)) => {
            let debug = format!("{e:?}");
            let kind = debug
                .split(|c: char| !c.is_alphanumeric())
                .next()
                .unwrap_or_default()
                .to_owned();
            RefVerdict::Err(kind)
        }
        Err(_) => RefVerdict::Panic,
    }
}

/// Our verdict in the same terms.
pub fn ours(bytes: &[u8]) -> RefVerdict {
    match tensorscope::format::parse(bytes) {
        Ok(_) => RefVerdict::Ok,
        Err(e) => RefVerdict::Err(e.kind().to_owned()),
    }
}

/// True when two tensor entries of the header share (begin, end): there the
/// reference's verdict depends on HashMap order, so only ok/error can be
/// compared.
pub fn has_offset_tie(bytes: &[u8]) -> bool {
    let Some(n) = bytes.get(..8).map(|b| {
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        u64::from_le_bytes(a)
    }) else {
        return false;
    };
    let Some(header) = usize::try_from(n)
        .ok()
        .and_then(|n| bytes.get(8..8usize.checked_add(n)?))
    else {
        return false;
    };
    let Ok(serde_json::Value::Object(map)) = serde_json::from_slice::<serde_json::Value>(header)
    else {
        return false;
    };
    let mut seen = std::collections::HashSet::new();
    for (k, v) in &map {
        if k == "__metadata__" {
            continue;
        }
        let offsets = match v {
            serde_json::Value::Object(o) => o.get("data_offsets").cloned(),
            serde_json::Value::Array(a) => a.get(2).cloned(),
            _ => None,
        };
        if let Some(o) = offsets
            && !seen.insert(o.to_string())
        {
            return true;
        }
    }
    false
}

/// Asserts that our verdict equals the reference's on `bytes`.
pub fn assert_same_verdict(bytes: &[u8]) {
    let theirs = reference(bytes);
    let mine = ours(bytes);
    match (&theirs, &mine) {
        // The reference panics in debug builds where offsets add up past
        // 2^64; ours reports MetadataIncompleteBuffer there (its release
        // verdict).
        (RefVerdict::Panic, RefVerdict::Err(_)) => {}
        _ if has_offset_tie(bytes) => assert_eq!(
            theirs == RefVerdict::Ok,
            mine == RefVerdict::Ok,
            "ok/error differs on tied offsets: reference {theirs:?}, ours {mine:?}, input {}",
            show(bytes)
        ),
        _ => assert_eq!(theirs, mine, "verdicts differ on {}", show(bytes)),
    }
}

/// A readable rendering of a file image for assertion messages.
pub fn show(bytes: &[u8]) -> String {
    let head: Vec<u8> = bytes.iter().take(400).copied().collect();
    format!(
        "{} bytes: {:?}",
        bytes.len(),
        String::from_utf8_lossy(&head)
    )
}
