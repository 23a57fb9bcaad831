//! A small, bounded reader of the protobuf wire format: the fields of one
//! message in order, as (field number, value). Varints are at most 10
//! bytes, every length-delimited field is checked against the bytes that
//! remain, and groups (wire types 3 and 4, long deprecated) are refused.
//! Nothing is allocated: values borrow the message's bytes, and nested
//! messages are read by calling [`Fields::new`] on a field's bytes, so
//! nesting is as deep as the caller chooses to go.

/// Why a message cannot be read: the rule broken and where, as a byte
/// offset from the start of the bytes given to [`Fields::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireError {
    /// Offset of the field (or varint) that breaks the rule.
    pub offset: usize,
    /// The rule, in a few words.
    pub rule: &'static str,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.rule, self.offset)
    }
}

/// One field's value, by wire type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1 (little-endian).
    Fixed64(u64),
    /// Wire type 2: a string, bytes, a message or a packed array.
    Bytes(&'a [u8]),
    /// Wire type 5 (little-endian).
    Fixed32(u32),
}

impl Value<'_> {
    /// A varint as a protobuf `int64` (two's complement).
    pub fn int64(self) -> Option<i64> {
        match self {
            Value::Varint(v) => Some(v as i64),
            _ => None,
        }
    }

    /// A varint as a protobuf `int32` or enum: `None` for another wire
    /// type or a value outside `i32` (which no writer produces; protobuf's
    /// own parser would truncate it, and a guess is not made here).
    pub fn int32(self) -> Option<i32> {
        self.int64().and_then(|v| i32::try_from(v).ok())
    }

    /// A varint as a protobuf `bool`.
    pub fn bool(self) -> Option<bool> {
        match self {
            Value::Varint(v) => Some(v != 0),
            _ => None,
        }
    }
}

/// Reads a varint of at most 10 bytes at `*pos`, advancing it.
pub fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, WireError> {
    let start = *pos;
    let mut value = 0u64;
    for i in 0..10 {
        let Some(&b) = buf.get(start + i) else {
            return Err(WireError {
                offset: start,
                rule: "truncated varint",
            });
        };
        if i == 9 && b > 1 {
            return Err(WireError {
                offset: start,
                rule: "varint overflows 64 bits",
            });
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *pos = start + i + 1;
            return Ok(value);
        }
    }
    Err(WireError {
        offset: start,
        rule: "varint longer than 10 bytes",
    })
}

/// The fields of one message, in order. After an error the iterator ends.
#[derive(Debug, Clone)]
pub struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
    failed: bool,
}

impl<'a> Fields<'a> {
    /// The fields of the message `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Fields {
            buf,
            pos: 0,
            failed: false,
        }
    }

    fn field(&mut self) -> Result<(u32, Value<'a>), WireError> {
        let at = self.pos;
        let tag = varint(self.buf, &mut self.pos)?;
        let err = |rule| WireError { offset: at, rule };
        let number = tag >> 3;
        if number == 0 || number > (1 << 29) - 1 {
            return Err(err("field number outside 1..2^29"));
        }
        let value = match tag & 7 {
            0 => Value::Varint(varint(self.buf, &mut self.pos)?),
            1 => Value::Fixed64(u64::from_le_bytes(
                self.take::<8>().ok_or(err("truncated fixed64"))?,
            )),
            2 => {
                let len = varint(self.buf, &mut self.pos)?;
                let rest = self.buf.len() - self.pos;
                let len = usize::try_from(len)
                    .ok()
                    .filter(|&l| l <= rest)
                    .ok_or(err("length-delimited field longer than its message"))?;
                let bytes = &self.buf[self.pos..self.pos + len];
                self.pos += len;
                Value::Bytes(bytes)
            }
            5 => Value::Fixed32(u32::from_le_bytes(
                self.take::<4>().ok_or(err("truncated fixed32"))?,
            )),
            3 | 4 => return Err(err("groups (wire types 3 and 4) are not read")),
            _ => return Err(err("invalid wire type")),
        };
        Ok((number as u32, value))
    }

    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let bytes = self.buf.get(self.pos..self.pos.checked_add(N)?)?;
        self.pos += N;
        bytes.try_into().ok()
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let r = self.field();
        self.failed = r.is_err();
        Some(r)
    }
}

/// The varints of a packed repeated field (or of one unpacked element).
pub fn packed(value: Value<'_>) -> Result<Vec<u64>, WireError> {
    match value {
        Value::Varint(v) => Ok(vec![v]),
        Value::Bytes(b) => {
            let mut out = Vec::new();
            let mut pos = 0;
            while pos < b.len() {
                out.push(varint(b, &mut pos)?);
            }
            Ok(out)
        }
        _ => Err(WireError {
            offset: 0,
            rule: "a repeated varint field of another wire type",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(buf: &[u8]) -> Result<Vec<(u32, Value<'_>)>, WireError> {
        Fields::new(buf).collect()
    }

    #[test]
    fn every_wire_type() {
        let mut m = vec![0x08, 0x96, 0x01]; // 1: varint 150
        m.extend([0x11, 1, 0, 0, 0, 0, 0, 0, 0]); // 2: fixed64 1
        m.extend([0x1a, 3, b'a', b'b', b'c']); // 3: bytes
        m.extend([0x25, 4, 3, 2, 1]); // 4: fixed32
        let f = all(&m).unwrap();
        assert_eq!(
            f,
            vec![
                (1, Value::Varint(150)),
                (2, Value::Fixed64(1)),
                (3, Value::Bytes(b"abc")),
                (4, Value::Fixed32(0x0102_0304)),
            ]
        );
    }

    #[test]
    fn negative_int32_is_ten_bytes() {
        let m = [
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        let f = all(&m).unwrap();
        assert_eq!(f[0].1.int32(), Some(-1));
        assert_eq!(Value::Varint(1 << 40).int32(), None);
        assert_eq!(Value::Fixed32(1).int32(), None);
    }

    #[test]
    fn hostile_messages_are_refused() {
        let cases: [(&[u8], &str); 7] = [
            (&[0x08], "truncated varint"),
            (&[0x08, 0x80, 0x80], "truncated varint"),
            (
                &[
                    0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
                ],
                "overflows",
            ),
            (&[0x0a, 0x05, 1, 2], "longer than its message"),
            (&[0x0b], "groups"),
            (&[0x00, 0x00], "field number"),
            (&[0x0e], "invalid wire type"),
        ];
        for (m, want) in cases {
            let e = all(m).unwrap_err();
            assert!(e.rule.contains(want), "{m:?}: {e}");
        }
        // A 4 GiB length in a small message.
        let e = all(&[0x0a, 0x80, 0x80, 0x80, 0x80, 0x10, 0]).unwrap_err();
        assert!(e.rule.contains("longer"));
        assert!(all(&[0x11, 1, 2]).is_err());
        assert!(all(&[0x15, 1, 2]).is_err());
    }

    #[test]
    fn packed_and_unpacked_repeated() {
        assert_eq!(packed(Value::Varint(7)).unwrap(), vec![7]);
        assert_eq!(
            packed(Value::Bytes(&[1, 0x96, 0x01])).unwrap(),
            vec![1, 150]
        );
        assert!(packed(Value::Bytes(&[0x80])).is_err());
    }
}
