//! The text arguments of protocol 0 pickles: `repr()`-quoted strings and
//! `raw-unicode-escape` text, decoded without evaluating anything.

use super::value::Node;

/// A Python 2 `str`: text when it is UTF-8, else bytes.
pub(super) fn text_or_bytes(b: &[u8]) -> Node {
    match std::str::from_utf8(b) {
        Ok(s) => Node::Str(s.to_owned()),
        Err(_) => Node::Bytes(b.to_vec()),
    }
}

/// The body of a `repr()`-quoted protocol 0 string, escapes decoded.
pub(super) fn unquote(line: &[u8]) -> Option<Vec<u8>> {
    let (&quote, rest) = line.split_first()?;
    if quote != b'\'' && quote != b'"' {
        return None;
    }
    let body = rest.strip_suffix(&[quote])?;
    let mut out = Vec::with_capacity(body.len());
    let mut at = 0;
    while at < body.len() {
        let byte = body[at];
        at += 1;
        if byte != b'\\' {
            out.push(byte);
            continue;
        }
        let Some(&escape) = body.get(at) else {
            out.push(b'\\');
            break;
        };
        at += 1;
        match escape {
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'0'..=b'7' => {
                let mut value = u32::from(escape - b'0');
                for _ in 0..2 {
                    match body.get(at) {
                        Some(&digit @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(digit - b'0');
                            at += 1;
                        }
                        _ => break,
                    }
                }
                out.push(value as u8);
            }
            b'x' => {
                let hex = body
                    .get(at..at + 2)
                    .and_then(|h| std::str::from_utf8(h).ok());
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(code) => {
                        out.push(code);
                        at += 2;
                    }
                    None => out.extend_from_slice(b"\\x"),
                }
            }
            b'\\' | b'\'' | b'"' => out.push(escape),
            other => out.extend_from_slice(&[b'\\', other]),
        }
    }
    Some(out)
}

/// Python's `raw-unicode-escape`: `\uXXXX` and `\UXXXXXXXX` escapes, every
/// other byte its latin-1 character.
pub(super) fn raw_unicode_escape(line: &[u8]) -> String {
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < line.len() {
        let c = line[i];
        let width = match (c, line.get(i + 1)) {
            (b'\\', Some(b'u')) => 4,
            (b'\\', Some(b'U')) => 8,
            _ => 0,
        };
        let code = (width > 0)
            .then(|| line.get(i + 2..i + 2 + width))
            .flatten()
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .and_then(char::from_u32);
        if let Some(ch) = code {
            out.push(ch);
            i += 2 + width;
        } else {
            out.push(char::from(c));
            i += 1;
        }
    }
    out
}
