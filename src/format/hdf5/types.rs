//! The datatype message (0x0003): every class parsed far enough to know
//! its length, and the few that are tensors mapped to a dtype (h5py's
//! reading): integers, IEEE floats, h5py's bool enum and the `{r, i}`
//! complex compound.

use super::error::Hdf5Error;
use super::io::Cur;
use crate::dtype::Dtype;

/// Nesting of compound, enum, array and variable-length types, at most.
const MAX_TYPE_DEPTH: u32 = 16;

/// A datatype, as far as this reader needs it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Type {
    /// Fixed-point: size in bytes, signed, big-endian, and whether it
    /// fills its bytes (bit offset 0, precision 8 x size).
    Int {
        size: u32,
        signed: bool,
        big: bool,
        exact: bool,
    },
    /// Floating-point: size, big-endian, and whether it is the IEEE
    /// layout of its size.
    Float { size: u32, big: bool, ieee: bool },
    /// A fixed-length string of `size` bytes; `space` when space-padded.
    Str { size: u32, space: bool },
    /// A variable-length string.
    VarStr,
    /// A compound: its size and its members (name, byte offset, type).
    Compound {
        size: u32,
        members: Vec<(Vec<u8>, u32, Type)>,
    },
    /// An enumeration: its base type and members (name, value bytes).
    Enum {
        base: Box<Type>,
        members: Vec<(Vec<u8>, Vec<u8>)>,
    },
    /// Anything else, by its class's name.
    Other(String),
}

/// How a tensor's stored elements become little-endian C-order bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Conv {
    /// As stored.
    Same,
    /// Each `unit`-byte part byte-swapped.
    Swap(usize),
    /// A complex stored imaginary part first: the halves exchanged (and
    /// each swapped when big-endian).
    ImagFirst { big: bool },
}

impl Conv {
    /// Converts `bytes` (whole elements) in place.
    pub fn apply(self, bytes: &mut [u8]) {
        match self {
            Conv::Same => {}
            Conv::Swap(unit) => {
                for e in bytes.chunks_exact_mut(unit) {
                    e.reverse();
                }
            }
            Conv::ImagFirst { big } => {
                for e in bytes.chunks_exact_mut(8) {
                    let (a, b) = e.split_at_mut(4);
                    a.swap_with_slice(b);
                    if big {
                        a.reverse();
                        b.reverse();
                    }
                }
            }
        }
    }

    /// True when the elements are a plain slice (read as they are, or
    /// swapped by the reader of a big-endian [`Data::Plain`]).
    ///
    /// [`Data::Plain`]: crate::format::decode::Data::Plain
    pub fn plain(self) -> Option<bool> {
        match self {
            Conv::Same => Some(false),
            Conv::Swap(_) => Some(true),
            Conv::ImagFirst { .. } => None,
        }
    }
}

impl Type {
    /// The size of one element in bytes, where known.
    pub fn size(&self) -> Option<u32> {
        match self {
            Type::Int { size, .. }
            | Type::Float { size, .. }
            | Type::Str { size, .. }
            | Type::Compound { size, .. } => Some(*size),
            Type::Enum { base, .. } => base.size(),
            Type::VarStr | Type::Other(_) => None,
        }
    }

    /// The tensor dtype h5py reads this type as, and the conversion of
    /// its elements; `Err` says why it is no tensor.
    pub fn tensor(&self) -> Result<(Dtype, Conv), String> {
        let swap = |big: bool, unit: u32| {
            if big && unit > 1 {
                Conv::Swap(unit as usize)
            } else {
                Conv::Same
            }
        };
        match self {
            Type::Int {
                size,
                signed,
                big,
                exact,
            } => {
                let dtype = match (size, signed) {
                    (1, true) => Dtype::I8,
                    (2, true) => Dtype::I16,
                    (4, true) => Dtype::I32,
                    (8, true) => Dtype::I64,
                    (1, false) => Dtype::U8,
                    (2, false) => Dtype::U16,
                    (4, false) => Dtype::U32,
                    (8, false) => Dtype::U64,
                    _ => return Err(format!("a {size}-byte integer")),
                };
                if !exact {
                    return Err(format!("a {size}-byte integer with padding bits"));
                }
                Ok((dtype, swap(*big, *size)))
            }
            Type::Float { size, big, ieee } => {
                let dtype = match size {
                    2 => Dtype::F16,
                    4 => Dtype::F32,
                    8 => Dtype::F64,
                    _ => return Err(format!("a {size}-byte float")),
                };
                if !ieee {
                    return Err(format!("a {size}-byte float of a non-IEEE layout"));
                }
                Ok((dtype, swap(*big, *size)))
            }
            Type::Enum { base, members } => {
                let is_bool = matches!(
                    **base,
                    Type::Int {
                        size: 1,
                        exact: true,
                        ..
                    }
                ) && members.len() == 2
                    && members
                        .iter()
                        .any(|(n, v)| n.as_slice() == b"FALSE" && v.as_slice() == [0])
                    && members
                        .iter()
                        .any(|(n, v)| n.as_slice() == b"TRUE" && v.as_slice() == [1]);
                if is_bool {
                    Ok((Dtype::Bool, Conv::Same))
                } else {
                    Err("an enumeration other than h5py's bool".into())
                }
            }
            Type::Compound { size, members } => {
                let part = |name: &[u8]| {
                    members
                        .iter()
                        .find(|(n, _, _)| n.as_slice() == name)
                        .and_then(|(_, off, t)| match t {
                            Type::Float {
                                size: 4,
                                big,
                                ieee: true,
                            } => Some((*off, *big)),
                            _ => None,
                        })
                };
                match (members.len(), *size, part(b"r"), part(b"i")) {
                    (2, 8, Some((0, big)), Some((4, big_i))) if big == big_i => {
                        Ok((Dtype::C64, swap(big, 4)))
                    }
                    (2, 8, Some((4, big)), Some((0, big_i))) if big == big_i => {
                        Ok((Dtype::C64, Conv::ImagFirst { big }))
                    }
                    _ => Err("a compound other than {r, i} of two float32".into()),
                }
            }
            Type::Str { .. } | Type::VarStr => Err("a string".into()),
            Type::Other(what) => Err(what.clone()),
        }
    }
}

/// Reads a datatype message's type.
pub(super) fn datatype(c: &mut Cur<'_>) -> Result<Type, Hdf5Error> {
    parse(c, 0)
}

fn parse(c: &mut Cur<'_>, depth: u32) -> Result<Type, Hdf5Error> {
    if depth > MAX_TYPE_DEPTH {
        return Err(c.err(format!("types nested deeper than {MAX_TYPE_DEPTH}")));
    }
    let b0 = c.u8()?;
    let (class, version) = (b0 & 0x0f, b0 >> 4);
    let bits = c.uint(3)? as u32;
    let size = c.u32()?;
    Ok(match class {
        0 => {
            let offset = c.u16()?;
            let precision = c.u16()?;
            Type::Int {
                size,
                signed: bits & 0x08 != 0,
                big: bits & 0x01 != 0,
                exact: offset == 0 && u32::from(precision) == size.saturating_mul(8),
            }
        }
        1 => {
            let offset = c.u16()?;
            let precision = c.u16()?;
            let (exp_loc, exp_size, man_loc, man_size) = (c.u8()?, c.u8()?, c.u8()?, c.u8()?);
            let exp_bias = c.u32()?;
            let sign = (bits >> 8) & 0xff;
            let order = (bits & 1) | ((bits >> 5) & 2);
            let norm = (bits >> 4) & 3;
            let layout = (sign, exp_loc, exp_size, man_loc, man_size, exp_bias);
            let ieee = offset == 0
                && u32::from(precision) == size.saturating_mul(8)
                && norm == 2
                && order < 2
                && match size {
                    2 => layout == (15, 10, 5, 0, 10, 15),
                    4 => layout == (31, 23, 8, 0, 23, 127),
                    8 => layout == (63, 52, 11, 0, 52, 1023),
                    _ => false,
                };
            Type::Float {
                size,
                big: order == 1,
                ieee,
            }
        }
        2 => {
            c.skip(2)?;
            Type::Other("a time".into())
        }
        3 => Type::Str {
            size,
            space: bits & 0x0f == 2,
        },
        4 => {
            c.skip(4)?;
            Type::Other("a bitfield".into())
        }
        5 => {
            c.skip((bits & 0xff) as usize)?;
            Type::Other("an opaque type".into())
        }
        6 => compound(c, version, bits, size, depth)?,
        7 => Type::Other("a reference".into()),
        8 => {
            let base = parse(c, depth + 1)?;
            let n = (bits & 0xffff) as usize;
            let mut names = Vec::new();
            for _ in 0..n {
                names.push(name(c, version)?);
            }
            let width = base.size().unwrap_or(0) as usize;
            let mut members = Vec::with_capacity(names.len());
            for name in names {
                members.push((name, c.bytes(width)?.to_vec()));
            }
            Type::Enum {
                base: Box::new(base),
                members,
            }
        }
        9 => {
            let base = parse(c, depth + 1)?;
            if bits & 0x0f == 1 {
                Type::VarStr
            } else {
                drop(base);
                Type::Other("a variable-length sequence".into())
            }
        }
        10 => {
            let rank = c.u8()? as usize;
            if version < 3 {
                c.skip(3)?;
                c.skip(rank * 8)?;
            } else {
                c.skip(rank * 4)?;
            }
            parse(c, depth + 1)?;
            Type::Other("an array type".into())
        }
        11 => {
            parse(c, depth + 1)?;
            Type::Other("a complex type of HDF5 2".into())
        }
        other => {
            return Err(c.err(format!("datatype class {other} is unknown")));
        }
    })
}

/// A compound's members, by the message's version.
fn compound(
    c: &mut Cur<'_>,
    version: u8,
    bits: u32,
    size: u32,
    depth: u32,
) -> Result<Type, Hdf5Error> {
    let n = (bits & 0xffff) as usize;
    let mut members = Vec::new();
    for _ in 0..n {
        let name = name(c, version)?;
        let offset = if version <= 2 {
            c.u32()?
        } else {
            let width = u64::from(size).max(1).ilog2() / 8 + 1;
            c.uint(width as usize)? as u32
        };
        let mut array = false;
        if version == 1 {
            let rank = c.u8()?;
            c.skip(3 + 4 + 4 + 16)?;
            array = rank > 0;
        }
        let t = parse(c, depth + 1)?;
        let t = if array {
            Type::Other("an array member".into())
        } else {
            t
        };
        members.push((name, offset, t));
    }
    Ok(Type::Compound { size, members })
}

/// A member name: NUL-terminated, padded to 8 bytes before version 3.
fn name(c: &mut Cur<'_>, version: u8) -> Result<Vec<u8>, Hdf5Error> {
    let rest = &c.data()[c.pos()..];
    let Some(len) = rest.iter().position(|&b| b == 0) else {
        return Err(c.err("a member name without its NUL"));
    };
    let name = rest[..len].to_vec();
    let used = if version < 3 {
        (len + 1).div_ceil(8) * 8
    } else {
        len + 1
    };
    c.skip(used)?;
    Ok(name)
}
