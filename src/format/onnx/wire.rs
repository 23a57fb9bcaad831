//! The protobuf wire format, read in place: a message is a byte range of
//! the file, its fields are read one at a time (key, then a varint, a
//! fixed 4 or 8 bytes, or a length-delimited payload whose range is
//! handed back, never copied). Every length is checked against the bytes
//! that remain in the enclosing message before anything else happens;
//! varints are at most 10 bytes; groups (wire types 3 and 4) and the
//! undefined wire types 6 and 7 are refused. Nothing recurses: a nested
//! message is just a payload range its caller may read (or not).

use std::ops::Range;

/// Why bytes are not a protobuf message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// A varint, fixed value or payload runs past the end of its
    /// enclosing message.
    Truncated {
        /// Where the item starts (absolute byte offset in the file).
        at: u64,
        /// What was being read.
        what: &'static str,
        /// Bytes it needs.
        need: u64,
        /// Bytes left in the enclosing message.
        left: u64,
    },
    /// A malformed key or varint, or a wire type that is not read.
    Invalid {
        /// Where (absolute byte offset in the file).
        at: u64,
        /// What is wrong.
        what: String,
    },
}

/// A field's value as the wire gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1: eight little-endian bytes.
    Fixed64(u64),
    /// Wire type 2: the payload's range in the file.
    Len(Range<usize>),
    /// Wire type 5: four little-endian bytes.
    Fixed32(u32),
}

/// One field of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The field number (1 ..= 2^29 - 1).
    pub number: u32,
    /// Its value.
    pub value: Value,
    /// Where its key starts in the file.
    pub at: usize,
}

impl Field {
    /// The payload range of a length-delimited field.
    pub fn payload(&self) -> Option<Range<usize>> {
        match &self.value {
            Value::Len(r) => Some(r.clone()),
            _ => None,
        }
    }

    /// The value of a varint field.
    pub fn varint(&self) -> Option<u64> {
        match self.value {
            Value::Varint(v) => Some(v),
            _ => None,
        }
    }
}

/// Reads a varint at `*pos` of `bytes`, not past `end`; at most 10
/// bytes, bits beyond the 64th dropped (as protobuf's parsers do).
pub fn varint(bytes: &[u8], pos: &mut usize, end: usize) -> Result<u64, WireError> {
    let start = *pos;
    let mut value: u64 = 0;
    for i in 0..10u32 {
        let p = start + i as usize;
        let Some(&b) = bytes.get(p).filter(|_| p < end) else {
            return Err(WireError::Truncated {
                at: start as u64,
                what: "a varint",
                need: u64::from(i) + 1,
                left: end.saturating_sub(start) as u64,
            });
        };
        value |= u64::from(b & 0x7f).checked_shl(7 * i).unwrap_or(0);
        if b & 0x80 == 0 {
            *pos = p + 1;
            return Ok(value);
        }
    }
    Err(WireError::Invalid {
        at: start as u64,
        what: "a varint longer than 10 bytes".to_owned(),
    })
}

/// The fields of a message, in order: an iterator that stops at the first
/// error (which it yields).
#[derive(Debug, Clone)]
pub struct Fields<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: usize,
    failed: bool,
}

impl<'a> Fields<'a> {
    /// The fields of the message at `range` of `bytes` (a range past the
    /// bytes is cut to them; its fields then fail as truncated).
    pub fn new(bytes: &'a [u8], range: Range<usize>) -> Self {
        let end = range.end.min(bytes.len());
        Fields {
            bytes,
            pos: range.start.min(end),
            end,
            failed: false,
        }
    }

    fn fixed<const N: usize>(&mut self, at: usize) -> Result<[u8; N], WireError> {
        let left = self.end - self.pos;
        let Some(b) = self.bytes.get(self.pos..self.pos + N).filter(|_| N <= left) else {
            return Err(WireError::Truncated {
                at: at as u64,
                what: "a fixed-width value",
                need: N as u64,
                left: left as u64,
            });
        };
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        self.pos += N;
        Ok(out)
    }

    fn field(&mut self) -> Result<Field, WireError> {
        let at = self.pos;
        let key = varint(self.bytes, &mut self.pos, self.end)?;
        let number = key >> 3;
        if number == 0 || number > (1 << 29) - 1 {
            return Err(WireError::Invalid {
                at: at as u64,
                what: format!("field number {number} (a key of {key})"),
            });
        }
        let number = number as u32;
        let value = match key & 7 {
            0 => Value::Varint(varint(self.bytes, &mut self.pos, self.end)?),
            1 => Value::Fixed64(u64::from_le_bytes(self.fixed::<8>(at)?)),
            2 => {
                let len = varint(self.bytes, &mut self.pos, self.end)?;
                let left = (self.end - self.pos) as u64;
                if len > left {
                    return Err(WireError::Truncated {
                        at: at as u64,
                        what: "a length-delimited field",
                        need: len,
                        left,
                    });
                }
                let start = self.pos;
                self.pos += len as usize;
                Value::Len(start..self.pos)
            }
            5 => Value::Fixed32(u32::from_le_bytes(self.fixed::<4>(at)?)),
            t @ (3 | 4) => {
                return Err(WireError::Invalid {
                    at: at as u64,
                    what: format!("field {number} is a group (wire type {t}), which is not read"),
                });
            }
            t => {
                return Err(WireError::Invalid {
                    at: at as u64,
                    what: format!("field {number} has the undefined wire type {t}"),
                });
            }
        };
        Ok(Field { number, value, at })
    }
}

impl Iterator for Fields<'_> {
    type Item = Result<Field, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.end {
            return None;
        }
        let out = self.field();
        self.failed = out.is_err();
        Some(out)
    }
}

/// The fields of a message stored in several parts (a singular message
/// field repeated on the wire, which protobuf merges: the parts read as
/// one message, in order).
pub fn fields_of<'a>(
    bytes: &'a [u8],
    parts: &'a [Range<usize>],
) -> impl Iterator<Item = Result<Field, WireError>> + 'a {
    parts
        .iter()
        .flat_map(move |r| Fields::new(bytes, r.clone()))
}

/// How the elements of a repeated scalar field are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    /// Varints (int32, int64, uint64): wire type 0 alone, packed in 2.
    Varint,
    /// Four bytes (float): wire type 5 alone, packed in 2.
    Fixed32,
    /// Eight bytes (double): wire type 1 alone, packed in 2.
    Fixed64,
}

/// Elements of a repeated scalar field in one field occurrence: one for
/// an unpacked element of the right wire type, the packed count for a
/// payload, `None` for a wrong wire type (then the field is unknown to
/// protobuf's parsers, and skipped). A packed payload that does not split
/// into whole elements is an error.
pub fn count_elements(bytes: &[u8], field: &Field, kind: Scalar) -> Result<Option<u64>, WireError> {
    match (&field.value, kind) {
        (Value::Varint(_), Scalar::Varint)
        | (Value::Fixed32(_), Scalar::Fixed32)
        | (Value::Fixed64(_), Scalar::Fixed64) => Ok(Some(1)),
        (Value::Len(r), Scalar::Varint) => {
            let Some(payload) = bytes.get(r.clone()) else {
                return Err(truncated_payload(field));
            };
            // Each varint ends in a byte under 0x80; the last byte must
            // end one, and no varint may pass 10 bytes.
            let mut count = 0u64;
            let mut run = 0usize;
            for &b in payload {
                run += 1;
                if b & 0x80 == 0 {
                    count += 1;
                    run = 0;
                } else if run >= 10 {
                    return Err(WireError::Invalid {
                        at: field.at as u64,
                        what: format!(
                            "a varint longer than 10 bytes in packed field {}",
                            field.number
                        ),
                    });
                }
            }
            if run != 0 {
                return Err(WireError::Truncated {
                    at: field.at as u64,
                    what: "the last varint of a packed field",
                    need: 1,
                    left: 0,
                });
            }
            Ok(Some(count))
        }
        (Value::Len(r), Scalar::Fixed32 | Scalar::Fixed64) => {
            let width = if kind == Scalar::Fixed32 { 4 } else { 8 };
            let len = r.len();
            if len % width != 0 {
                return Err(WireError::Invalid {
                    at: field.at as u64,
                    what: format!(
                        "packed field {} holds {len} bytes, not a whole number of {width}-byte elements",
                        field.number
                    ),
                });
            }
            Ok(Some((len / width) as u64))
        }
        _ => Ok(None),
    }
}

fn truncated_payload(field: &Field) -> WireError {
    WireError::Truncated {
        at: field.at as u64,
        what: "a length-delimited field",
        need: 0,
        left: 0,
    }
}

/// Hands each element of one occurrence of a repeated scalar field to
/// `each` as its raw 64-bit value (a varint's value, a fixed value's
/// bits); wrong wire types hand nothing.
pub fn for_each_element<E: From<WireError>>(
    bytes: &[u8],
    field: &Field,
    kind: Scalar,
    each: &mut impl FnMut(u64) -> Result<(), E>,
) -> Result<(), E> {
    match (&field.value, kind) {
        (Value::Varint(v), Scalar::Varint) | (Value::Fixed64(v), Scalar::Fixed64) => each(*v),
        (Value::Fixed32(v), Scalar::Fixed32) => each(u64::from(*v)),
        (Value::Len(r), _) => {
            let Some(payload) = bytes.get(r.clone()) else {
                return Err(truncated_payload(field).into());
            };
            match kind {
                Scalar::Varint => {
                    let mut pos = r.start;
                    while pos < r.end {
                        each(varint(bytes, &mut pos, r.end)?)?;
                    }
                }
                Scalar::Fixed32 => {
                    for c in payload.chunks_exact(4) {
                        each(u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))?;
                    }
                }
                Scalar::Fixed64 => {
                    for c in payload.chunks_exact(8) {
                        let mut a = [0u8; 8];
                        a.copy_from_slice(c);
                        each(u64::from_le_bytes(a))?;
                    }
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_of_one_to_ten_bytes() {
        let mut pos = 0;
        assert_eq!(varint(&[0x96, 0x01], &mut pos, 2), Ok(150));
        assert_eq!(pos, 2);
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        let mut pos = 0;
        assert_eq!(varint(&max, &mut pos, 10), Ok(u64::MAX));
        let eleven = [0xffu8; 11];
        let mut pos = 0;
        assert!(matches!(
            varint(&eleven, &mut pos, 11),
            Err(WireError::Invalid { .. })
        ));
        let mut pos = 0;
        assert!(matches!(
            varint(&[0x80, 0x80], &mut pos, 2),
            Err(WireError::Truncated { .. })
        ));
    }

    #[test]
    fn a_length_past_the_message_is_refused_before_anything() {
        // Field 1, wire type 2, length 4 GiB, in a 7-byte message.
        let bytes = [0x0a, 0x80, 0x80, 0x80, 0x80, 0x10, 0x00];
        let mut f = Fields::new(&bytes, 0..bytes.len());
        assert!(matches!(
            f.next(),
            Some(Err(WireError::Truncated {
                need: 4_294_967_296,
                ..
            }))
        ));
        assert!(f.next().is_none());
    }

    #[test]
    fn groups_and_undefined_wire_types_are_refused() {
        for key in [0x0b, 0x0c, 0x0e, 0x0f] {
            let bytes = [key, 0];
            let mut f = Fields::new(&bytes, 0..2);
            assert!(matches!(f.next(), Some(Err(WireError::Invalid { .. }))));
        }
        // Field number 0.
        let mut f = Fields::new(&[0x00, 0x00], 0..2);
        assert!(matches!(f.next(), Some(Err(WireError::Invalid { .. }))));
    }

    #[test]
    fn packed_counts() {
        let bytes = [0x01, 0x96, 0x01, 0x7f];
        let field = Field {
            number: 5,
            value: Value::Len(0..4),
            at: 0,
        };
        assert_eq!(count_elements(&bytes, &field, Scalar::Varint), Ok(Some(3)));
        let mut seen = Vec::new();
        for_each_element(&bytes, &field, Scalar::Varint, &mut |v| {
            seen.push(v);
            Ok::<_, WireError>(())
        })
        .unwrap();
        assert_eq!(seen, [1, 150, 127]);
        assert!(count_elements(&bytes, &field, Scalar::Fixed32).is_ok());
        let odd = Field {
            number: 4,
            value: Value::Len(0..3),
            at: 0,
        };
        assert!(count_elements(&bytes, &odd, Scalar::Fixed32).is_err());
        let cut = Field {
            number: 5,
            value: Value::Len(0..2),
            at: 0,
        };
        assert!(count_elements(&bytes, &cut, Scalar::Varint).is_err());
    }
}
