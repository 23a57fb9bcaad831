//! A bounded msgpack reader: every type of the spec (nil, bool, the ints,
//! the floats, str, bin, array, map, ext), read into a [`Value`] tree whose
//! strings, bins and ext payloads are byte ranges of the input (nothing is
//! copied). Every length is checked against the bytes present before it is
//! used, every count before anything is reserved (an element takes a byte
//! at the least), the values declared over a whole file are capped at
//! [`MAX_VALUES`], and nesting is followed with an explicit stack, refused
//! past [`MAX_DEPTH`]: no recursion on input.

use std::ops::Range;

use super::FlaxError;

/// Containers nested deeper than this are refused.
pub const MAX_DEPTH: usize = 1000;

/// Values (array elements, map keys and values) a file may declare at most
/// over all its containers, ext payloads included: a bound on the tree's
/// memory (no checkpoint comes near it; a model's state dict has thousands).
pub const MAX_VALUES: u64 = 1 << 22;

/// One msgpack value. Strings, bins and ext payloads are ranges of the
/// input bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `nil`.
    Nil,
    /// `true` or `false`.
    Bool(bool),
    /// A non-negative integer (of any encoding).
    UInt(u64),
    /// A negative integer.
    Int(i64),
    /// A float32 (widened exactly) or float64.
    Float(f64),
    /// A str: its bytes (not yet checked to be UTF-8).
    Str(Range<usize>),
    /// A bin: its bytes.
    Bin(Range<usize>),
    /// An array.
    Array(Vec<Value>),
    /// A map's pairs, in file order (repeated keys kept).
    Map(Vec<(Value, Value)>),
    /// An ext: its code and payload.
    Ext {
        /// The type code.
        code: i8,
        /// The payload's bytes.
        data: Range<usize>,
    },
}

impl Value {
    /// The msgpack type's name, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Nil => "nil",
            Value::Bool(_) => "a bool",
            Value::UInt(_) | Value::Int(_) => "an int",
            Value::Float(_) => "a float",
            Value::Str(_) => "a str",
            Value::Bin(_) => "a bin",
            Value::Array(_) => "an array",
            Value::Map(_) => "a map",
            Value::Ext { .. } => "an ext",
        }
    }
}

/// A header read: a complete scalar, or a container's count.
enum Head {
    Scalar(Value),
    Array(u64),
    Map(u64),
}

/// A container being filled.
enum Frame {
    Array {
        items: Vec<Value>,
        left: u64,
    },
    Map {
        pairs: Vec<(Value, Value)>,
        key: Option<Value>,
        left: u64,
    },
}

/// Reads values from `bytes[pos..end]`.
pub struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: usize,
    /// Values that may still be declared (see [`MAX_VALUES`]).
    budget: &'a mut u64,
}

impl<'a> Parser<'a> {
    /// A parser of `bytes[range]` (clamped to the bytes), drawing on
    /// `budget` for the values it declares.
    pub fn new(bytes: &'a [u8], range: Range<usize>, budget: &'a mut u64) -> Self {
        let end = range.end.min(bytes.len());
        Parser {
            bytes,
            pos: range.start.min(end),
            end,
            budget,
        }
    }

    /// Where the next value starts.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left before the end.
    fn left(&self) -> usize {
        self.end.saturating_sub(self.pos)
    }

    /// The next `n` bytes as a range, checked against the end.
    fn span(&mut self, n: u64, what: &'static str, at: usize) -> Result<Range<usize>, FlaxError> {
        let left = self.left();
        match usize::try_from(n) {
            Ok(n) if n <= left => {
                let start = self.pos;
                self.pos += n;
                Ok(start..self.pos)
            }
            _ => Err(FlaxError::Truncated {
                what,
                at: at as u64,
                need: n,
                left: left as u64,
            }),
        }
    }

    /// The next `N` bytes.
    fn fixed<const N: usize>(
        &mut self,
        what: &'static str,
        at: usize,
    ) -> Result<[u8; N], FlaxError> {
        let r = self.span(N as u64, what, at)?;
        let mut out = [0u8; N];
        if let Some(src) = self.bytes.get(r) {
            out.copy_from_slice(src);
        }
        Ok(out)
    }

    /// A big-endian unsigned length of `n` bytes (1, 2 or 4).
    fn length(&mut self, n: usize, what: &'static str, at: usize) -> Result<u64, FlaxError> {
        Ok(match n {
            1 => u64::from(self.fixed::<1>(what, at)?[0]),
            2 => u64::from(u16::from_be_bytes(self.fixed(what, at)?)),
            _ => u64::from(u32::from_be_bytes(self.fixed(what, at)?)),
        })
    }

    /// An ext's code and payload of `len` bytes.
    fn ext(&mut self, len: u64, at: usize) -> Result<Value, FlaxError> {
        let code = self.fixed::<1>("an ext's type code", at)?[0] as i8;
        let data = self.span(len, "an ext's payload", at)?;
        Ok(Value::Ext { code, data })
    }

    /// A container's count, checked against the bytes left and the budget.
    fn count(&mut self, count: u64, map: bool, at: usize) -> Result<Head, FlaxError> {
        let values = if map { count.saturating_mul(2) } else { count };
        let left = self.left() as u64;
        if values > left {
            return Err(FlaxError::CountTooLarge {
                what: if map { "a map" } else { "an array" },
                at: at as u64,
                count,
                left,
            });
        }
        if values > *self.budget {
            return Err(FlaxError::TooLarge(format!(
                "the file declares more than {MAX_VALUES} values (at byte {at})"
            )));
        }
        *self.budget -= values;
        Ok(if map {
            Head::Map(count)
        } else {
            Head::Array(count)
        })
    }

    /// The next header: a whole scalar, or a container's count.
    fn head(&mut self) -> Result<Head, FlaxError> {
        let at = self.pos;
        let [b] = self.fixed::<1>("a value", at)?;
        let scalar = |v| Ok(Head::Scalar(v));
        match b {
            0x00..=0x7f => scalar(Value::UInt(u64::from(b))),
            0x80..=0x8f => self.count(u64::from(b & 0x0f), true, at),
            0x90..=0x9f => self.count(u64::from(b & 0x0f), false, at),
            0xa0..=0xbf => scalar(Value::Str(self.span(u64::from(b & 0x1f), "a str", at)?)),
            0xc0 => scalar(Value::Nil),
            0xc2 => scalar(Value::Bool(false)),
            0xc3 => scalar(Value::Bool(true)),
            0xc4..=0xc6 => {
                let n = self.length(1 << (b - 0xc4), "a bin's length", at)?;
                scalar(Value::Bin(self.span(n, "a bin", at)?))
            }
            0xc7..=0xc9 => {
                let n = self.length(1 << (b - 0xc7), "an ext's length", at)?;
                scalar(self.ext(n, at)?)
            }
            0xca => scalar(Value::Float(f64::from(f32::from_be_bytes(
                self.fixed("a float32", at)?,
            )))),
            0xcb => scalar(Value::Float(f64::from_be_bytes(
                self.fixed("a float64", at)?,
            ))),
            0xcc => scalar(Value::UInt(u64::from(self.fixed::<1>("a uint8", at)?[0]))),
            0xcd => scalar(Value::UInt(u64::from(u16::from_be_bytes(
                self.fixed("a uint16", at)?,
            )))),
            0xce => scalar(Value::UInt(u64::from(u32::from_be_bytes(
                self.fixed("a uint32", at)?,
            )))),
            0xcf => scalar(Value::UInt(u64::from_be_bytes(self.fixed("a uint64", at)?))),
            0xd0 => scalar(int(i64::from(self.fixed::<1>("an int8", at)?[0] as i8))),
            0xd1 => scalar(int(i64::from(i16::from_be_bytes(
                self.fixed("an int16", at)?,
            )))),
            0xd2 => scalar(int(i64::from(i32::from_be_bytes(
                self.fixed("an int32", at)?,
            )))),
            0xd3 => scalar(int(i64::from_be_bytes(self.fixed("an int64", at)?))),
            0xd4..=0xd8 => scalar(self.ext(1 << (b - 0xd4), at)?),
            0xd9..=0xdb => {
                let n = self.length(1 << (b - 0xd9), "a str's length", at)?;
                scalar(Value::Str(self.span(n, "a str", at)?))
            }
            0xdc | 0xdd => {
                let n = self.length(if b == 0xdc { 2 } else { 4 }, "an array's count", at)?;
                self.count(n, false, at)
            }
            0xde | 0xdf => {
                let n = self.length(if b == 0xde { 2 } else { 4 }, "a map's count", at)?;
                self.count(n, true, at)
            }
            0xe0..=0xff => scalar(Value::Int(i64::from(b as i8))),
            0xc1 => Err(FlaxError::BadMsgpack {
                at: at as u64,
                byte: b,
            }),
        }
    }

    /// One complete value (containers and all they hold), with an explicit
    /// stack of the containers open.
    pub fn value(&mut self) -> Result<Value, FlaxError> {
        let mut stack: Vec<Frame> = Vec::new();
        loop {
            let at = self.pos;
            let head = self.head()?;
            if !matches!(head, Head::Scalar(_)) && stack.len() >= MAX_DEPTH {
                return Err(FlaxError::NestingTooDeep { at: at as u64 });
            }
            let mut v = match head {
                Head::Scalar(v) => v,
                Head::Array(0) => Value::Array(Vec::new()),
                Head::Map(0) => Value::Map(Vec::new()),
                // The count is below the bytes left and the budget.
                Head::Array(n) => {
                    stack.push(Frame::Array {
                        items: Vec::with_capacity(n as usize),
                        left: n,
                    });
                    continue;
                }
                Head::Map(n) => {
                    stack.push(Frame::Map {
                        pairs: Vec::with_capacity(n as usize),
                        key: None,
                        left: n,
                    });
                    continue;
                }
            };
            // Hand the value to the container open, closing those it fills.
            loop {
                let Some(top) = stack.last_mut() else {
                    return Ok(v);
                };
                let full = match top {
                    Frame::Array { items, left } => {
                        items.push(v);
                        *left = left.saturating_sub(1);
                        *left == 0
                    }
                    Frame::Map { pairs, key, left } => match key.take() {
                        None => {
                            *key = Some(v);
                            false
                        }
                        Some(k) => {
                            pairs.push((k, v));
                            *left = left.saturating_sub(1);
                            *left == 0
                        }
                    },
                };
                if !full {
                    break;
                }
                v = match stack.pop() {
                    Some(Frame::Array { items, .. }) => Value::Array(items),
                    Some(Frame::Map { pairs, .. }) => Value::Map(pairs),
                    // Not reached: the loop found a frame on top.
                    None => Value::Nil,
                };
            }
        }
    }
}

/// A signed integer: non-negative ones as [`Value::UInt`], so that a value
/// has one form whatever its encoding.
fn int(i: i64) -> Value {
    u64::try_from(i).map_or(Value::Int(i), Value::UInt)
}
