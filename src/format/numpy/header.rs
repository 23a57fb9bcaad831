//! The `.npy` header: magic, version, and the Python dict literal that
//! names the dtype, the storage order and the shape (NUMPY.md, "Header
//! rules"). Parsed by a small literal reader that accepts what
//! `ast.literal_eval` accepts for these three keys and nothing that would
//! be a call or an expression.

use crate::dtype::Dtype;

use super::NumpyError;
use crate::format::stored::ByteOrder;

/// The magic that starts every `.npy` file.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Headers longer than this are refused (a 2.0 header of 70 KB is normal).
pub const MAX_HEADER_BYTES: u64 = 1 << 20;

/// Literals nested deeper than this are refused (`((((…))))`).
const MAX_DEPTH: usize = 16;

/// A parsed `.npy` header. `data_offset` is where the array's bytes start,
/// relative to the start of the `.npy` bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    /// The format version, `(major, minor)`: `(1, 0)`, `(2, 0)` or `(3, 0)`.
    pub version: (u8, u8),
    /// The `descr` string as written (`'<f4'`).
    pub descr: String,
    /// The element type it names.
    pub dtype: Dtype,
    /// The byte order of the stored elements.
    pub byte_order: ByteOrder,
    /// True when the array is stored column-major.
    pub fortran_order: bool,
    /// The logical shape (C order); empty for a 0-d array.
    pub shape: Vec<u64>,
    /// Bytes from the start of the `.npy` to its data: magic, version,
    /// length field and header text.
    pub data_offset: u64,
    /// Elements times the element size: the data's length in bytes.
    pub nbytes: u64,
}

/// The fixed prefix of a `.npy`: how many bytes the header's text needs
/// after the magic and version (`None` while fewer than the length field
/// are known). For a stream, which must know how much to read.
pub fn header_end(prefix: &[u8]) -> Result<Option<u64>, NumpyError> {
    let Some(magic) = prefix.get(..MAGIC.len()) else {
        return if MAGIC.starts_with(prefix) {
            Ok(None)
        } else {
            Err(NumpyError::BadMagic)
        };
    };
    if magic != MAGIC {
        return Err(NumpyError::BadMagic);
    }
    let (Some(&major), Some(&minor)) = (prefix.get(6), prefix.get(7)) else {
        return Ok(None);
    };
    let len_bytes = match (major, minor) {
        (1, 0) => 2,
        (2 | 3, 0) => 4,
        _ => return Err(NumpyError::Version { major, minor }),
    };
    let Some(field) = prefix.get(8..8 + len_bytes) else {
        return Ok(None);
    };
    let len = field
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    if len > MAX_HEADER_BYTES {
        return Err(NumpyError::HeaderTooLong {
            length: len,
            max: MAX_HEADER_BYTES,
        });
    }
    Ok(Some(8 + len_bytes as u64 + len))
}

/// Parses the header at the start of `bytes`, which must hold at least the
/// whole header (the data may follow, or not: the caller checks its length).
pub fn parse_header(bytes: &[u8]) -> Result<NpyHeader, NumpyError> {
    if bytes.is_empty() {
        return Err(NumpyError::Empty);
    }
    let Some(end) = header_end(bytes)? else {
        return Err(NumpyError::Truncated {
            what: "the header's length field",
            needed: 12,
            found: bytes.len() as u64,
        });
    };
    let version = (bytes[6], bytes[7]);
    let start = if version.0 == 1 { 10 } else { 12 };
    let Some(raw) = usize::try_from(end).ok().and_then(|e| bytes.get(start..e)) else {
        return Err(NumpyError::Truncated {
            what: "the header",
            needed: end,
            found: bytes.len() as u64,
        });
    };
    let text: String = if version.0 == 3 {
        std::str::from_utf8(raw)
            .map_err(|e| NumpyError::Header(format!("a 3.0 header must be UTF-8: {e}")))?
            .to_owned()
    } else {
        // latin-1: every byte is the code point of its value.
        raw.iter().map(|&b| char::from(b)).collect()
    };
    let fields = parse_dict(&text)?;
    let descr = fields.descr;
    let (dtype, byte_order) = dtype_of(&descr)?;
    let nbytes = dtype
        .byte_len(&fields.shape)
        .filter(|_| {
            fields
                .shape
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .is_some()
        })
        .ok_or_else(|| NumpyError::Overflow {
            shape: fields.shape.clone(),
        })?;
    Ok(NpyHeader {
        version,
        descr,
        dtype,
        byte_order,
        fortran_order: fields.fortran_order,
        shape: fields.shape,
        data_offset: end,
        nbytes,
    })
}

/// Where a `.npy`'s data starts when numpy pickled it (a dtype holding
/// Python objects: `O`, or a record dtype whose data is a pickle, as numpy
/// writes one with an object field): `Ok(Some(offset))`; `Ok(None)` for an
/// array of plain elements; or why the header is not a `.npy` header (a
/// record dtype of plain fields is refused as a dtype).
pub fn pickled_data(bytes: &[u8]) -> Result<Option<u64>, NumpyError> {
    match parse_header(bytes) {
        Ok(_) => Ok(None),
        Err(NumpyError::Dtype { descr, why })
            if descr == "[...]"
                || matches!(
                    descr.trim_start_matches(['<', '>', '|', '=']),
                    "O" | "O4" | "O8"
                ) =>
        {
            let Some(end) = header_end(bytes)? else {
                return Err(NumpyError::Dtype { descr, why });
            };
            let pickled = usize::try_from(end)
                .ok()
                .and_then(|e| bytes.get(e))
                .is_some_and(|&b| b == 0x80);
            if descr == "[...]" && !pickled {
                return Err(NumpyError::Dtype { descr, why });
            }
            Ok(Some(end))
        }
        Err(e) => Err(e),
    }
}

/// The dtype and byte order a `descr` names, or why it is refused.
pub fn dtype_of(descr: &str) -> Result<(Dtype, ByteOrder), NumpyError> {
    let refused = |why: &'static str| NumpyError::Dtype {
        descr: descr.to_owned(),
        why,
    };
    let mut chars = descr.chars();
    let order = chars.next().ok_or_else(|| refused("an empty descr"))?;
    let code = chars.as_str();
    let byte_order = match order {
        '<' | '|' | '=' => ByteOrder::Little,
        '>' => ByteOrder::Big,
        _ => return Err(refused("not a numpy type string")),
    };
    let dtype = match code {
        "b1" => Dtype::Bool,
        "u1" => Dtype::U8,
        "i1" => Dtype::I8,
        "u2" => Dtype::U16,
        "u4" => Dtype::U32,
        "u8" => Dtype::U64,
        "i2" => Dtype::I16,
        "i4" => Dtype::I32,
        "i8" => Dtype::I64,
        "f2" => Dtype::F16,
        "f4" => Dtype::F32,
        "f8" => Dtype::F64,
        "c8" => Dtype::C64,
        "O" | "O8" | "O4" => {
            return Err(refused(
                "an object array: its data is a pickle, which is never loaded or executed",
            ));
        }
        "c16" => return Err(refused("complex128 has no safetensors dtype")),
        "c32" | "c24" => return Err(refused("complex long double has no safetensors dtype")),
        "f16" | "f12" => return Err(refused("long double has no safetensors dtype")),
        c if c.starts_with('U') => return Err(refused("a unicode string array")),
        c if c.starts_with('S') || c.starts_with('a') => {
            return Err(refused("a byte string array"));
        }
        c if c.starts_with("M8") => return Err(refused("a datetime64 array")),
        c if c.starts_with("m8") => return Err(refused("a timedelta64 array")),
        c if c.starts_with('V') => {
            return Err(refused(
                "raw void bytes (ml_dtypes bfloat16 or float8 arrays become this under np.save): the file does not say what they mean",
            ));
        }
        _ => return Err(refused("an unknown type code")),
    };
    // Single-byte types have no byte order whichever prefix they carry.
    let byte_order = if dtype.bits() <= 8 {
        ByteOrder::Little
    } else {
        byte_order
    };
    Ok((dtype, byte_order))
}

/// The three fields of the header dict.
struct Fields {
    descr: String,
    fortran_order: bool,
    shape: Vec<u64>,
}

/// A Python literal, as far as a header needs.
#[derive(Debug)]
enum Lit {
    Str(String),
    Bool(bool),
    Int(i128),
    Tuple(Vec<Lit>),
    List,
    Dict(Vec<(Lit, Lit)>),
    None,
}

impl Lit {
    fn kind(&self) -> &'static str {
        match self {
            Lit::Str(_) => "a string",
            Lit::Bool(_) => "a bool",
            Lit::Int(_) => "an integer",
            Lit::Tuple(_) => "a tuple",
            Lit::List => "a list",
            Lit::Dict(_) => "a dict",
            Lit::None => "None",
        }
    }
}

fn parse_dict(text: &str) -> Result<Fields, NumpyError> {
    let bad = |m: String| NumpyError::Header(m);
    let mut p = Parser {
        s: text.as_bytes(),
        text,
        at: 0,
    };
    p.skip_ws();
    if p.peek() != Some(b'{') {
        return Err(bad(format!(
            "the header is not a dict literal (it starts {:?})",
            crate::text::safe_text(text, 24)
        )));
    }
    let lit = p.value(0)?;
    p.skip_ws();
    if p.at != p.s.len() {
        return Err(bad(format!(
            "unexpected text after the header dict at byte {}",
            p.at
        )));
    }
    let Lit::Dict(entries) = lit else {
        return Err(bad("the header is not a dict literal".into()));
    };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    for (k, v) in entries {
        let Lit::Str(key) = k else {
            return Err(bad(format!("a header key is {}, not a string", k.kind())));
        };
        let slot_taken = match key.as_str() {
            "descr" => descr.replace(v).is_some(),
            "fortran_order" => fortran.replace(v).is_some(),
            "shape" => shape.replace(v).is_some(),
            other => {
                return Err(bad(format!(
                    "the header has the key {:?}; only 'descr', 'fortran_order' and 'shape' are allowed",
                    crate::text::safe_text(other, 64)
                )));
            }
        };
        if slot_taken {
            return Err(bad(format!("the header repeats the key {key:?}")));
        }
    }
    let missing = |k: &str| bad(format!("the header has no {k:?} key"));
    let descr = match descr.ok_or_else(|| missing("descr"))? {
        Lit::Str(s) => s,
        Lit::List => {
            return Err(NumpyError::Dtype {
                descr: "[...]".into(),
                why: "a structured (record) dtype",
            });
        }
        other => {
            return Err(bad(format!(
                "'descr' is {}, not a type string",
                other.kind()
            )));
        }
    };
    let fortran_order = match fortran.ok_or_else(|| missing("fortran_order"))? {
        Lit::Bool(b) => b,
        other => {
            return Err(bad(format!(
                "'fortran_order' is {}, not True or False",
                other.kind()
            )));
        }
    };
    let shape = match shape.ok_or_else(|| missing("shape"))? {
        Lit::Tuple(dims) => dims
            .into_iter()
            .map(|d| match d {
                Lit::Int(n) if n < 0 => Err(bad(format!("the shape has a negative dimension {n}"))),
                Lit::Int(n) => u64::try_from(n)
                    .map_err(|_| bad(format!("the shape's dimension {n} overflows 64 bits"))),
                other => Err(bad(format!(
                    "a dimension of the shape is {}, not an integer",
                    other.kind()
                ))),
            })
            .collect::<Result<Vec<u64>, _>>()?,
        other => {
            return Err(bad(format!(
                "'shape' is {}, not a tuple of integers",
                other.kind()
            )));
        }
    };
    Ok(Fields {
        descr,
        fortran_order,
        shape,
    })
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')) {
            self.at += 1;
        }
    }

    fn err(&self, what: &str) -> NumpyError {
        NumpyError::Header(format!("{what} at byte {} of the header", self.at))
    }

    fn value(&mut self, depth: usize) -> Result<Lit, NumpyError> {
        if depth > MAX_DEPTH {
            return Err(self.err("the header's literal nests too deep"));
        }
        self.skip_ws();
        match self.peek() {
            Some(b'{') => {
                self.at += 1;
                let mut entries = Vec::new();
                loop {
                    self.skip_ws();
                    if self.peek() == Some(b'}') {
                        self.at += 1;
                        return Ok(Lit::Dict(entries));
                    }
                    let key = self.value(depth + 1)?;
                    self.skip_ws();
                    if self.peek() != Some(b':') {
                        return Err(self.err("expected ':' in the header dict"));
                    }
                    self.at += 1;
                    let value = self.value(depth + 1)?;
                    entries.push((key, value));
                    if !self.separator(b'}')? {
                        self.at += 1;
                        return Ok(Lit::Dict(entries));
                    }
                }
            }
            Some(open @ (b'(' | b'[')) => {
                self.at += 1;
                let close = if open == b'(' { b')' } else { b']' };
                let mut items = Vec::new();
                let mut trailing_comma = false;
                loop {
                    self.skip_ws();
                    if self.peek() == Some(close) {
                        self.at += 1;
                        break;
                    }
                    items.push(self.value(depth + 1)?);
                    trailing_comma = self.separator(close)?;
                    if !trailing_comma {
                        self.at += 1;
                        break;
                    }
                }
                if open == b'(' {
                    // `(3)` is the integer 3, not a tuple.
                    if items.len() == 1 && !trailing_comma {
                        return Ok(items.remove(0));
                    }
                    Ok(Lit::Tuple(items))
                } else {
                    Ok(Lit::List)
                }
            }
            Some(b'\'' | b'"') => self.string().map(Lit::Str),
            Some(b'u' | b'U' | b'b' | b'B')
                if matches!(self.s.get(self.at + 1), Some(b'\'' | b'"')) =>
            {
                self.at += 1;
                self.string().map(Lit::Str)
            }
            Some(b'-' | b'+' | b'0'..=b'9') => self.int(),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let start = self.at;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
                {
                    self.at += 1;
                }
                match &self.text[start..self.at] {
                    "True" => Ok(Lit::Bool(true)),
                    "False" => Ok(Lit::Bool(false)),
                    "None" => Ok(Lit::None),
                    name => Err(NumpyError::Header(format!(
                        "the header holds the name {:?} (a call or a variable, which a literal cannot hold)",
                        crate::text::safe_text(name, 64)
                    ))),
                }
            }
            Some(_) => Err(self.err("unexpected character")),
            None => Err(self.err("the header ends inside its literal")),
        }
    }

    /// After an item: `true` for a comma (more may follow), `false` when
    /// the closing bracket is next (not consumed).
    fn separator(&mut self, close: u8) -> Result<bool, NumpyError> {
        self.skip_ws();
        match self.peek() {
            Some(b',') => {
                self.at += 1;
                Ok(true)
            }
            Some(c) if c == close => Ok(false),
            _ => Err(self.err("expected ',' or a closing bracket")),
        }
    }

    fn int(&mut self) -> Result<Lit, NumpyError> {
        let negative = match self.peek() {
            Some(b'-') => {
                self.at += 1;
                true
            }
            Some(b'+') => {
                self.at += 1;
                false
            }
            _ => false,
        };
        self.skip_ws();
        let start = self.at;
        let mut n: i128 = 0;
        while let Some(c @ b'0'..=b'9') = self.peek() {
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(i128::from(c - b'0')))
                .ok_or_else(|| self.err("an integer overflows"))?;
            self.at += 1;
        }
        if self.at == start {
            return Err(self.err("expected digits"));
        }
        // Python 2 wrote long integers with an `L` suffix.
        if matches!(self.peek(), Some(b'L' | b'l')) {
            self.at += 1;
        }
        if self
            .peek()
            .is_some_and(|c| c == b'.' || c.is_ascii_alphabetic())
        {
            return Err(self.err("not an integer"));
        }
        Ok(Lit::Int(if negative { -n } else { n }))
    }

    fn string(&mut self) -> Result<String, NumpyError> {
        let quote = self.s[self.at];
        self.at += 1;
        let mut out = String::new();
        loop {
            let rest = &self.text[self.at..];
            let Some(c) = rest.chars().next() else {
                return Err(self.err("a string is not closed"));
            };
            self.at += c.len_utf8();
            match c {
                c if c as u32 == u32::from(quote) => return Ok(out),
                '\n' => return Err(self.err("a string breaks its line")),
                '\\' => {
                    let Some(e) = self.text[self.at..].chars().next() else {
                        return Err(self.err("a string is not closed"));
                    };
                    self.at += e.len_utf8();
                    out.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        '0' => '\0',
                        '\\' | '\'' | '"' => e,
                        _ => return Err(self.err("an escape a header never needs")),
                    });
                }
                c => out.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(version: (u8, u8), dict: &str) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend([version.0, version.1]);
        let mut text = dict.as_bytes().to_vec();
        text.push(b'\n');
        if version.0 == 1 {
            out.extend((text.len() as u16).to_le_bytes());
        } else {
            out.extend((text.len() as u32).to_le_bytes());
        }
        out.extend(text);
        out
    }

    #[test]
    fn headers_numpy_writes() {
        let h = parse_header(&npy(
            (1, 0),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }        ",
        ))
        .expect("ok");
        assert_eq!(h.dtype, Dtype::F32);
        assert_eq!(h.shape, [3, 4]);
        assert!(!h.fortran_order);
        assert_eq!(h.nbytes, 48);
        let h = parse_header(&npy(
            (2, 0),
            "{\"shape\":(),\"fortran_order\":True,\"descr\":\">i8\"}",
        ))
        .expect("ok");
        assert_eq!(h.shape, Vec::<u64>::new());
        assert_eq!(h.byte_order, ByteOrder::Big);
        assert!(h.fortran_order);
        let h = parse_header(&npy(
            (3, 0),
            "{'descr': '|b1', 'fortran_order': False, 'shape': (5,)}",
        ))
        .expect("ok");
        assert_eq!(h.shape, [5]);
        assert_eq!(h.dtype, Dtype::Bool);
        let h = parse_header(&npy(
            (1, 0),
            "{'descr': '<u2', 'fortran_order': False, 'shape': (3L, 0L)}",
        ))
        .expect("py2 longs");
        assert_eq!(h.shape, [3, 0]);
        assert_eq!(h.nbytes, 0);
    }

    #[test]
    fn refusals() {
        let cases = [
            ("{'descr': '<f4', 'fortran_order': False}", "no \"shape\""),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
                "the key",
            ),
            (
                "dict(descr='<f4', fortran_order=False, shape=(1,))",
                "not a dict",
            ),
            (
                "{'descr': '<f4', 'fortran_order': 1, 'shape': (1,)}",
                "not True or False",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
                "negative",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': [1]}",
                "not a tuple",
            ),
            (
                "{'descr': '|O', 'fortran_order': False, 'shape': (1,)}",
                "pickle",
            ),
            (
                "{'descr': '<z8', 'fortran_order': False, 'shape': (1,)}",
                "unknown",
            ),
            (
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}",
                "structured",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296)}",
                "overflow",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': ((((((((((((((((((((1,),),),),),),),),),),),),),),),),),),),)}",
                "deep",
            ),
        ];
        for (dict, needle) in cases {
            let e = parse_header(&npy((1, 0), dict)).expect_err(dict);
            assert!(e.to_string().contains(needle), "{dict}: {e}");
        }
        let e = parse_header(&npy((4, 0), "{}")).expect_err("v4");
        assert!(matches!(e, NumpyError::Version { major: 4, .. }), "{e}");
        let e = parse_header(b"\x93NUMPZ\x01\x00").expect_err("magic");
        assert!(matches!(e, NumpyError::BadMagic), "{e}");
        let e = parse_header(b"").expect_err("empty");
        assert!(matches!(e, NumpyError::Empty), "{e}");
        let mut bad = npy(
            (3, 0),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
        );
        let at = bad.len() - 5;
        bad[at] = 0xff;
        let e = parse_header(&bad).expect_err("utf-8");
        assert!(e.to_string().contains("UTF-8"), "{e}");
        let mut long = MAGIC.to_vec();
        long.extend([2, 0]);
        long.extend(4_000_000_000u32.to_le_bytes());
        assert!(matches!(
            parse_header(&long),
            Err(NumpyError::HeaderTooLong { .. })
        ));
        let cut = &npy(
            (1, 0),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
        )[..30];
        assert!(matches!(
            parse_header(cut),
            Err(NumpyError::Truncated { .. })
        ));
    }

    #[test]
    fn descrs() {
        for (d, t, o) in [
            ("<f8", Dtype::F64, ByteOrder::Little),
            (">c8", Dtype::C64, ByteOrder::Big),
            (">u1", Dtype::U8, ByteOrder::Little),
            ("|i1", Dtype::I8, ByteOrder::Little),
            (">f2", Dtype::F16, ByteOrder::Big),
        ] {
            assert_eq!(dtype_of(d).expect(d), (t, o));
        }
        for d in [
            "<U5", "|S3", "<M8[ns]", "<m8[s]", "<c16", "<f16", "<f12", "|V2", "<z8", "",
        ] {
            assert!(dtype_of(d).is_err(), "{d}");
        }
    }
}
