//! GGUF's two type tables: the metadata value types, and the ggml tensor
//! types with their block sizes (GGUF.md, "Types").

/// A metadata value type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// 0.
    U8,
    /// 1.
    I8,
    /// 2.
    U16,
    /// 3.
    I16,
    /// 4.
    U32,
    /// 5.
    I32,
    /// 6.
    F32,
    /// 7.
    Bool,
    /// 8.
    Str,
    /// 9.
    Array,
    /// 10.
    U64,
    /// 11.
    I64,
    /// 12.
    F64,
}

impl ValueType {
    /// The type of id `id`, if it is one.
    pub fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => Self::U8,
            1 => Self::I8,
            2 => Self::U16,
            3 => Self::I16,
            4 => Self::U32,
            5 => Self::I32,
            6 => Self::F32,
            7 => Self::Bool,
            8 => Self::Str,
            9 => Self::Array,
            10 => Self::U64,
            11 => Self::I64,
            12 => Self::F64,
            _ => return None,
        })
    }

    /// Its name as GGUF.md (and gguf-py) spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::U8 => "UINT8",
            Self::I8 => "INT8",
            Self::U16 => "UINT16",
            Self::I16 => "INT16",
            Self::U32 => "UINT32",
            Self::I32 => "INT32",
            Self::F32 => "FLOAT32",
            Self::Bool => "BOOL",
            Self::Str => "STRING",
            Self::Array => "ARRAY",
            Self::U64 => "UINT64",
            Self::I64 => "INT64",
            Self::F64 => "FLOAT64",
        }
    }

    /// The fewest bytes a value of this type takes (a string: its length;
    /// an array: its element type and length).
    pub fn min_bytes(self) -> u64 {
        match self {
            Self::U8 | Self::I8 | Self::Bool => 1,
            Self::U16 | Self::I16 => 2,
            Self::U32 | Self::I32 | Self::F32 => 4,
            Self::U64 | Self::I64 | Self::F64 | Self::Str => 8,
            Self::Array => 12,
        }
    }
}

/// A ggml tensor type: `(name, id, block elements, block bytes)`, in
/// GGUF.md's tables (stored types have blocks of one element).
const GGML: [(&str, u32, u64, u64); 34] = [
    ("F32", 0, 1, 4),
    ("F16", 1, 1, 2),
    ("Q4_0", 2, 32, 18),
    ("Q4_1", 3, 32, 20),
    ("Q5_0", 6, 32, 22),
    ("Q5_1", 7, 32, 24),
    ("Q8_0", 8, 32, 34),
    ("Q8_1", 9, 32, 40),
    ("Q2_K", 10, 256, 84),
    ("Q3_K", 11, 256, 110),
    ("Q4_K", 12, 256, 144),
    ("Q5_K", 13, 256, 176),
    ("Q6_K", 14, 256, 210),
    ("Q8_K", 15, 256, 292),
    ("IQ2_XXS", 16, 256, 66),
    ("IQ2_XS", 17, 256, 74),
    ("IQ3_XXS", 18, 256, 98),
    ("IQ1_S", 19, 256, 50),
    ("IQ4_NL", 20, 32, 18),
    ("IQ3_S", 21, 256, 110),
    ("IQ2_S", 22, 256, 82),
    ("IQ4_XS", 23, 256, 136),
    ("I8", 24, 1, 1),
    ("I16", 25, 1, 2),
    ("I32", 26, 1, 4),
    ("I64", 27, 1, 8),
    ("F64", 28, 1, 8),
    ("IQ1_M", 29, 256, 56),
    ("BF16", 30, 1, 2),
    ("TQ1_0", 34, 256, 54),
    ("TQ2_0", 35, 256, 66),
    ("MXFP4", 39, 32, 17),
    ("NVFP4", 40, 64, 36),
    ("Q1_0", 41, 128, 18),
];

/// A ggml tensor type GGUF.md lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GgmlType(u8);

impl GgmlType {
    /// The type of id `id`, if GGUF.md lists it.
    pub fn from_id(id: u32) -> Option<Self> {
        GGML.iter()
            .position(|&(_, i, _, _)| i == id)
            .map(|p| Self(p as u8))
    }

    fn row(self) -> (&'static str, u32, u64, u64) {
        GGML[usize::from(self.0)]
    }

    /// Its name as gguf-py's `GGMLQuantizationType` spells it.
    pub fn name(self) -> &'static str {
        self.row().0
    }

    /// Its id.
    pub fn id(self) -> u32 {
        self.row().1
    }

    /// `(elements, bytes)` of one block (1 element for a stored type).
    pub fn block(self) -> (u64, u64) {
        (self.row().2, self.row().3)
    }

    /// True for a type stored as plain elements (F32 … I64, BF16).
    pub fn is_stored(self) -> bool {
        self.row().2 == 1
    }
}
