//! Allocation helpers below every layer, so that `stats` and `quant` share
//! them without importing each other: [`written_zeros`], the counting
//! tables of the scans and of the dequantizer's code counts, written on
//! allocation.

/// `len` zeros (`T::default()`), written rather than allocated zeroed: a
/// zeroed allocation maps the shared zero page, and the first count in each
/// of its pages then takes a copy-on-write fault whose TLB flush interrupts
/// every other thread of the process (the value is opaque, so that the
/// writes are not turned back into a zeroed allocation). For the counting
/// tables of the scans.
pub(crate) fn written_zeros<T: Copy + Default>(len: usize) -> Vec<T> {
    let mut table = Vec::with_capacity(len);
    table.resize(len, std::hint::black_box(T::default()));
    table
}
