//! Builders for test files: raw headers from bytes, and whole files written
//! by the official `safetensors` writer.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use safetensors::{Dtype as RefDtype, View};

/// A file image: `N`, the header text, then `data_len` bytes of data.
pub fn with_header(header: &str, data_len: usize) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.resize(out.len() + data_len, 0xAB);
    out
}

/// A one-tensor header `{"t": {dtype, shape, data_offsets}}`.
pub fn one_tensor(dtype: &str, shape: &[u64], offsets: [u64; 2]) -> String {
    format!(
        r#"{{"t":{{"dtype":"{dtype}","shape":{shape:?},"data_offsets":[{},{}]}}}}"#,
        offsets[0], offsets[1]
    )
}

/// Writes `bytes` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create fixture folder");
    }
    std::fs::write(&path, bytes).expect("write fixture");
    path
}

/// A tensor to give the official writer.
#[derive(Debug, Clone)]
pub struct RefTensor {
    pub dtype: RefDtype,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

impl View for &RefTensor {
    fn dtype(&self) -> RefDtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// Every dtype of the reference crate, in its declaration order.
pub const REF_DTYPES: [RefDtype; 22] = [
    RefDtype::BOOL,
    RefDtype::F4,
    RefDtype::F6_E2M3,
    RefDtype::F6_E3M2,
    RefDtype::U8,
    RefDtype::I8,
    RefDtype::F8_E5M2,
    RefDtype::F8_E4M3,
    RefDtype::F8_E8M0,
    RefDtype::F8_E4M3FNUZ,
    RefDtype::F8_E5M2FNUZ,
    RefDtype::I16,
    RefDtype::U16,
    RefDtype::F16,
    RefDtype::BF16,
    RefDtype::I32,
    RefDtype::U32,
    RefDtype::F32,
    RefDtype::C64,
    RefDtype::F64,
    RefDtype::I64,
    RefDtype::U64,
];

/// Bytes needed by `numel` elements of `dtype`, or None when not whole.
pub fn ref_nbytes(dtype: RefDtype, numel: usize) -> Option<usize> {
    let bits = numel * dtype.bitsize();
    bits.is_multiple_of(8).then_some(bits / 8)
}

/// Serialises tensors with the official writer.
pub fn reference_file(
    tensors: &[(String, RefTensor)],
    metadata: Option<HashMap<String, String>>,
) -> Vec<u8> {
    safetensors::serialize(tensors.iter().map(|(n, t)| (n.as_str(), t)), metadata)
        .expect("the official writer accepts the fixture")
}

/// A small valid file with a few dtypes, made by the official writer.
pub fn small_model() -> Vec<u8> {
    let t = |dtype, shape: Vec<usize>| {
        let numel: usize = shape.iter().product();
        let n = ref_nbytes(dtype, numel).expect("whole bytes");
        RefTensor {
            dtype,
            shape,
            data: (0..n).map(|i| (i * 7 + 3) as u8).collect(),
        }
    };
    let tensors = vec![
        ("embed.weight".to_owned(), t(RefDtype::F32, vec![4, 3])),
        ("layers.0.attn.q".to_owned(), t(RefDtype::BF16, vec![3, 3])),
        ("layers.0.norm".to_owned(), t(RefDtype::F16, vec![3])),
        ("scale".to_owned(), t(RefDtype::F64, vec![])),
        ("packed".to_owned(), t(RefDtype::F4, vec![2, 4])),
        ("empty".to_owned(), t(RefDtype::I64, vec![0, 5])),
    ];
    let meta = HashMap::from([("format".to_owned(), "pt".to_owned())]);
    reference_file(&tensors, Some(meta))
}
