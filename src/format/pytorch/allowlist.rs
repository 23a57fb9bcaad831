//! The globals a PyTorch pickle may name (PICKLE.md §4): torch's
//! `weights_only` allowlist, plus the `__builtin__` spellings of its
//! `builtins` entries. Any other global makes a file unsafe; nothing is
//! ever imported either way.

/// Names allowed whole.
const NAMES: &[&str] = &[
    "collections.OrderedDict",
    "collections.Counter",
    "builtins.set",
    "builtins.bytearray",
    "builtins.complex",
    "__builtin__.set",
    "__builtin__.bytearray",
    "__builtin__.complex",
    "_codecs.encode",
    "torch.Size",
    "torch.Tensor",
    "torch.device",
    "torch.nn.parameter.Parameter",
    "torch.serialization._get_layout",
    "torch.storage.TypedStorage",
    "torch.storage.UntypedStorage",
    "torch._tensor._rebuild_from_type_v2",
    "torch.QInt32Storage",
    "torch.QInt8Storage",
    "torch.QUInt2x4Storage",
    "torch.QUInt4x2Storage",
    "torch.QUInt8Storage",
    "torch.per_tensor_affine",
    "torch.per_tensor_symmetric",
    "torch.per_channel_affine",
    "torch.per_channel_affine_float_qparams",
    "torch.per_channel_symmetric",
];

/// `torch._utils.` + these.
const REBUILDS: &[&str] = &[
    "_rebuild_tensor",
    "_rebuild_tensor_v2",
    "_rebuild_tensor_v3",
    "_rebuild_parameter",
    "_rebuild_parameter_with_state",
    "_rebuild_qtensor",
    "_rebuild_sparse_tensor",
    "_rebuild_meta_tensor_no_storage",
    "_rebuild_wrapper_subclass",
    "_rebuild_device_tensor_from_numpy",
    "_rebuild_device_tensor_from_cpu_tensor",
];

/// `torch.XStorage` and `torch.cuda.XStorage`.
const STORAGES: &[&str] = &[
    "BFloat16",
    "Bool",
    "Byte",
    "Char",
    "ComplexDouble",
    "ComplexFloat",
    "Double",
    "Float",
    "Half",
    "Int",
    "Long",
    "Short",
];

/// `torch.XTensor` and `torch.cuda.XTensor` (and, less `Bool`, the
/// `sparse` ones).
const TENSORS: &[&str] = &[
    "BFloat16", "Bool", "Byte", "Char", "Double", "Float", "Half", "Int", "Long", "Short",
];

/// `torch.` + these dtypes (with `int1`…`int7` and `uint1`…`uint7`).
const DTYPES: &[&str] = &[
    "bfloat16",
    "bool",
    "complex32",
    "complex64",
    "complex128",
    "bcomplex32",
    "float16",
    "float32",
    "float64",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bits1x8",
    "bits2x4",
    "bits4x2",
    "bits8",
    "bits16",
    "qint8",
    "qint32",
    "quint8",
    "quint2x4",
    "quint4x2",
];

/// True when `module.name` is allowlisted.
pub fn is_allowed(module: &str, name: &str) -> bool {
    let full = format!("{module}.{name}");
    if NAMES.contains(&full.as_str()) {
        return true;
    }
    match module {
        "torch._utils" => REBUILDS.contains(&name),
        "torch" | "torch.cuda" => {
            if let Some(x) = name.strip_suffix("Storage")
                && STORAGES.contains(&x)
            {
                return true;
            }
            if let Some(x) = name.strip_suffix("Tensor")
                && TENSORS.contains(&x)
            {
                return true;
            }
            module == "torch" && is_dtype(name)
        }
        "torch.sparse" | "torch.cuda.sparse" => name
            .strip_suffix("Tensor")
            .is_some_and(|x| x != "Bool" && TENSORS.contains(&x)),
        _ => false,
    }
}

/// True for a dtype's name under `torch.`.
fn is_dtype(name: &str) -> bool {
    if DTYPES.contains(&name) {
        return true;
    }
    let bits = name
        .strip_prefix("uint")
        .or_else(|| name.strip_prefix("int"));
    bits.is_some_and(|b| matches!(b, "1" | "2" | "3" | "4" | "5" | "6" | "7"))
}

/// How many names the allowlist holds (PICKLE.md: 147).
#[cfg(test)]
fn count() -> usize {
    NAMES.len()
        + REBUILDS.len()
        + 2 * STORAGES.len()
        + 2 * TENSORS.len()
        + 2 * (TENSORS.len() - 1)
        + DTYPES.len()
        + 14
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowlist_is_torchs_and_nothing_else() {
        assert_eq!(count(), 147);
        for (m, n) in [
            ("torch._utils", "_rebuild_tensor_v2"),
            ("collections", "OrderedDict"),
            ("__builtin__", "set"),
            ("torch", "FloatStorage"),
            ("torch.cuda", "HalfStorage"),
            ("torch", "BFloat16Tensor"),
            ("torch.sparse", "FloatTensor"),
            ("torch", "float8_e4m3fn"),
            ("torch", "uint7"),
            ("torch", "int1"),
            ("torch.storage", "UntypedStorage"),
        ] {
            assert!(is_allowed(m, n), "{m}.{n}");
        }
        for (m, n) in [
            ("posix", "system"),
            ("os", "system"),
            ("__builtin__", "eval"),
            ("builtins", "exec"),
            ("builtins", "getattr"),
            ("__builtin__", "__import__"),
            ("subprocess", "Popen"),
            ("commands", "Popen"),
            ("torch.serialization", "save"),
            ("torch", "load"),
            ("torch.sparse", "BoolTensor"),
            ("torch", "int8Storage"),
            ("torch", "uint8x"),
            ("torch", "int0"),
            ("torch._utils", "_rebuild_tensor_v9"),
            ("", "OrderedDict"),
        ] {
            assert!(!is_allowed(m, n), "{m}.{n}");
        }
    }
}
