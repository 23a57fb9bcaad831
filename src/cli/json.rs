//! The one pretty printer of every verb's JSON: `serde_json`'s pretty
//! layout, with arrays of scalars on one line, written into a buffer whose
//! short pieces are copied at fixed lengths.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter};

/// Appends `value` to `buf` as pretty JSON nested `depth` levels deep: two
/// spaces an indent, as `serde_json::to_string_pretty`, except that an array
/// of numbers (or booleans, or nulls) is written on one line, `[1, 2, 3]`:
/// a histogram's 257 edges take one line, not 257, so a document of a
/// million small tensors is a third as long and written three times as
/// fast. Its first line is not indented, the lines after it are, so it can
/// follow a key or an indent already written. This is how a streamed
/// document comes out byte for byte as the whole one would, without
/// re-indenting a copy.
pub fn pretty_at<T: Serialize + ?Sized>(
    buf: &mut Vec<u8>,
    value: &T,
    depth: usize,
) -> serde_json::Result<()> {
    let mut json = JsonBuf::from_vec(std::mem::take(buf));
    let result = json.pretty(value, depth);
    *buf = json.into_bytes();
    result
}

/// JSON written piece after piece into one buffer, as [`pretty_at`] writes
/// it: for many values in a row (a run of tensors), its room is zeroed once
/// and its state allocated once.
pub struct JsonBuf {
    sink: Sink,
    arrays: Vec<Layout>,
}

impl JsonBuf {
    pub fn with_capacity(capacity: usize) -> Self {
        Self::from_vec(Vec::with_capacity(capacity))
    }

    fn from_vec(bytes: Vec<u8>) -> Self {
        Self {
            sink: Sink::new(bytes),
            arrays: Vec::new(),
        }
    }

    /// Bytes as they are (a separator, an indent).
    pub fn raw(&mut self, bytes: &[u8]) {
        self.sink.put(bytes);
    }

    /// `value` as pretty JSON nested `depth` levels deep (see [`pretty_at`]).
    pub fn pretty<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
        depth: usize,
    ) -> serde_json::Result<()> {
        self.arrays.clear();
        // Every byte goes through the formatter, which writes into the
        // sink: the serializer's own writer is never written to.
        value.serialize(&mut serde_json::Serializer::with_formatter(
            io::sink(),
            Nested {
                out: &mut self.sink,
                depth,
                has_value: false,
                arrays: &mut self.arrays,
                pending: None,
            },
        ))
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.sink.finish()
    }

    /// What was written.
    pub fn as_bytes(&self) -> &[u8] {
        self.sink.bytes.get(..self.sink.len).unwrap_or(&[])
    }

    /// Empties the buffer for new JSON, keeping its room (already zeroed
    /// once: reusing it costs nothing).
    pub fn clear(&mut self) {
        self.sink.len = 0;
        self.sink.start = 0;
    }
}

/// The bytes being written. Past `len`, `bytes` holds at least [`SHORT`]
/// zeros already allocated, so a short piece (a number, a separator, an
/// indent) is copied with two moves of a fixed length that overlap, rather
/// than by a call to `memcpy`, which costs more than the piece: a histogram
/// is hundreds of such pieces.
struct Sink {
    bytes: Vec<u8>,
    len: usize,
    /// Where this document began: the room added grows with what it wrote.
    start: usize,
}

/// The longest piece copied at fixed lengths, and the least room past `len`.
const SHORT: usize = 64;

impl Sink {
    fn new(mut bytes: Vec<u8>) -> Self {
        let len = bytes.len();
        bytes.resize(len + 4 * SHORT, 0);
        Self {
            bytes,
            len,
            start: len,
        }
    }

    fn finish(mut self) -> Vec<u8> {
        self.bytes.truncate(self.len);
        self.bytes
    }

    #[inline]
    fn put(&mut self, piece: &[u8]) {
        let n = piece.len();
        if n > SHORT {
            self.put_long(piece);
            return;
        }
        if self.bytes.len() - self.len < SHORT {
            self.grow();
        }
        copy_short(&mut self.bytes[self.len..self.len + SHORT], piece);
        self.len += n;
    }

    /// The next `SHORT` bytes, to write a piece of at most that length in
    /// place; [`Sink::advance`] then counts what was written.
    #[inline]
    fn window(&mut self) -> &mut [u8; SHORT] {
        if self.bytes.len() - self.len < SHORT {
            self.grow();
        }
        let end = self.len + SHORT;
        match <&mut [u8; SHORT]>::try_from(&mut self.bytes[self.len..end]) {
            Ok(window) => window,
            // A slice of `SHORT` bytes is an array of them.
            Err(_) => unreachable!("a window of SHORT bytes"),
        }
    }

    #[inline]
    fn advance(&mut self, n: usize) {
        self.len += n;
    }

    /// A finite `f64` as `serde_json` writes it (its shortest text that
    /// reads back the same).
    #[inline]
    fn put_f64(&mut self, x: f64) {
        self.put(zmij::Buffer::new().format_finite(x).as_bytes());
    }

    /// An integer as `serde_json` writes it, digit pairs straight into the
    /// window (a histogram's counts are most of its numbers).
    #[inline]
    fn put_u64(&mut self, mut v: u64) {
        let window = self.window();
        if v < 10 {
            // Most counts of a histogram of a small tensor are 0.
            window[0] = b'0' + v as u8;
            self.advance(1);
            return;
        }
        let n = v.checked_ilog10().map_or(1, |l| l as usize + 1);
        let mut i = n;
        while v >= 100 {
            let r = (v % 100) as usize * 2;
            v /= 100;
            i -= 2;
            window[i..i + 2].copy_from_slice(&PAIRS[r..r + 2]);
        }
        if v >= 10 {
            let r = v as usize * 2;
            window[..2].copy_from_slice(&PAIRS[r..r + 2]);
        } else {
            window[0] = b'0' + v as u8;
        }
        self.advance(n);
    }

    /// Room for at least `SHORT` more bytes: as much again as this document
    /// holds, so zeroing the room costs about one write of each byte.
    #[cold]
    fn grow(&mut self) {
        let extra = (self.len - self.start).max(4 * SHORT);
        self.bytes.resize(self.len + extra, 0);
    }

    #[cold]
    fn put_long(&mut self, piece: &[u8]) {
        self.bytes.truncate(self.len);
        self.bytes.extend_from_slice(piece);
        self.len = self.bytes.len();
        self.grow();
    }
}

/// Pairs of decimal digits, "00" to "99".
static PAIRS: [u8; 200] = {
    let mut pairs = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        pairs[2 * i] = b'0' + (i / 10) as u8;
        pairs[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    pairs
};

/// Copies `piece` (at most [`SHORT`] bytes) to the start of `room` (`SHORT`
/// bytes): a length in `[k, 2k]` is two copies of `k` bytes, at its start
/// and at its end.
#[inline]
fn copy_short(room: &mut [u8], piece: &[u8]) {
    #[inline]
    fn two<const K: usize>(room: &mut [u8], piece: &[u8]) {
        let n = piece.len();
        room[..K].copy_from_slice(&piece[..K]);
        room[n - K..n].copy_from_slice(&piece[n - K..]);
    }
    match piece.len() {
        0 => {}
        n @ 1..=3 => {
            room[0] = piece[0];
            room[n / 2] = piece[n / 2];
            room[n - 1] = piece[n - 1];
        }
        4..=7 => two::<4>(room, piece),
        8..=15 => two::<8>(room, piece),
        16..=31 => two::<16>(room, piece),
        _ => two::<32>(room, piece),
    }
}

impl Write for Sink {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.put(buf);
        Ok(buf.len())
    }

    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.put(buf);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// How the elements of an open array are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// No element yet.
    Undecided,
    /// Scalars on the array's line.
    Inline,
    /// One element a line, as `serde_json` pretty-prints.
    Lines,
}

/// `serde_json`'s pretty formatter, starting `depth` levels in, with arrays
/// of scalars on one line. It writes into `out` and ignores the writer the
/// serializer passes.
struct Nested<'a> {
    out: &'a mut Sink,
    depth: usize,
    has_value: bool,
    /// The layout of each open array, innermost last.
    arrays: &'a mut Vec<Layout>,
    /// An array's first element has begun but nothing of it was written:
    /// its first write decides the layout.
    pending: Option<bool>,
}

impl Nested<'_> {
    fn line(&mut self, first: bool) {
        /// A separator and a line break, then enough spaces for one piece at
        /// any usual depth.
        const LINE: &[u8; 66] =
            b",\n                                                                ";
        let start = usize::from(first);
        let mut n = self.depth * 2;
        let k = n.min(LINE.len() - 2);
        self.out.put(&LINE[start..2 + k]);
        n -= k;
        while n > 0 {
            let k = n.min(LINE.len() - 2);
            self.out.put(&LINE[2..2 + k]);
            n -= k;
        }
    }

    fn close(&mut self, bracket: &[u8]) {
        self.depth = self.depth.saturating_sub(1);
        if self.has_value {
            self.line(true);
        }
        self.out.put(bracket);
    }

    /// Before a number, a boolean or a null: the first element of an
    /// array makes it an inline one.
    fn scalar(&mut self) {
        if self.pending.take().is_some()
            && let Some(layout) = self.arrays.last_mut()
        {
            *layout = Layout::Inline;
        }
    }

    /// Before a string, an object or an array: the first element of an
    /// array makes it one of lines, and its line is written now.
    fn compound(&mut self) {
        if let Some(first) = self.pending.take() {
            if let Some(layout) = self.arrays.last_mut() {
                *layout = Layout::Lines;
            }
            self.line(first);
        }
    }
}

/// The scalar writers of [`Nested`]: each settles a pending layout, then
/// writes as `serde_json` does.
macro_rules! scalar_writers {
    ($($name:ident: $t:ty),* $(,)?) => {
        $(
            #[inline]
            fn $name<W: ?Sized + Write>(&mut self, _w: &mut W, value: $t) -> io::Result<()> {
                self.scalar();
                CompactFormatter.$name(&mut *self.out, value)
            }
        )*
    };
}

impl Formatter for Nested<'_> {
    fn write_null<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.scalar();
        self.out.put(b"null");
        Ok(())
    }

    #[inline]
    fn write_f64<W: ?Sized + Write>(&mut self, _w: &mut W, value: f64) -> io::Result<()> {
        // The serializer writes `null` for NaN and the infinities itself.
        self.scalar();
        self.out.put_f64(value);
        Ok(())
    }

    #[inline]
    fn write_u64<W: ?Sized + Write>(&mut self, _w: &mut W, value: u64) -> io::Result<()> {
        self.scalar();
        self.out.put_u64(value);
        Ok(())
    }

    scalar_writers!(
        write_bool: bool,
        write_i8: i8,
        write_i16: i16,
        write_i32: i32,
        write_i64: i64,
        write_i128: i128,
        write_u8: u8,
        write_u16: u16,
        write_u32: u32,
        write_u128: u128,
        write_f32: f32,
        write_number_str: &str,
    );

    fn begin_string<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.compound();
        self.out.put(b"\"");
        Ok(())
    }

    fn end_string<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.out.put(b"\"");
        Ok(())
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        _w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        self.out.put(fragment.as_bytes());
        Ok(())
    }

    fn write_char_escape<W: ?Sized + Write>(
        &mut self,
        _w: &mut W,
        char_escape: CharEscape,
    ) -> io::Result<()> {
        CompactFormatter.write_char_escape(&mut *self.out, char_escape)
    }

    fn write_raw_fragment<W: ?Sized + Write>(
        &mut self,
        _w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        self.compound();
        self.out.put(fragment.as_bytes());
        Ok(())
    }

    fn begin_array<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.compound();
        self.depth += 1;
        self.has_value = false;
        self.arrays.push(Layout::Undecided);
        self.out.put(b"[");
        Ok(())
    }

    fn end_array<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        // An element begun and never written cannot happen; forget it.
        self.pending = None;
        if self.arrays.pop() == Some(Layout::Inline) {
            self.depth = self.depth.saturating_sub(1);
            self.out.put(b"]");
        } else {
            self.close(b"]");
        }
        Ok(())
    }

    #[inline]
    fn begin_array_value<W: ?Sized + Write>(&mut self, _w: &mut W, first: bool) -> io::Result<()> {
        match self.arrays.last() {
            Some(Layout::Inline) => {
                if !first {
                    let window = self.out.window();
                    window[..2].copy_from_slice(b", ");
                    self.out.advance(2);
                }
            }
            Some(Layout::Undecided) => self.pending = Some(first),
            _ => self.line(first),
        }
        Ok(())
    }

    #[inline]
    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.compound();
        self.depth += 1;
        self.has_value = false;
        self.out.put(b"{");
        Ok(())
    }

    fn end_object<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.close(b"}");
        Ok(())
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, _w: &mut W, first: bool) -> io::Result<()> {
        self.line(first);
        Ok(())
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.out.put(b": ");
        Ok(())
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Sink, pretty_at};

    /// Pieces of every length, written one after another in any order,
    /// come out as their concatenation, after what the buffer held.
    #[test]
    fn the_sink_writes_every_length_exactly() {
        let pieces: Vec<Vec<u8>> = (0..=200usize)
            .chain((0..=70).rev())
            .map(|n| (0..n).map(|i| (i * 7 + n) as u8).collect())
            .collect();
        let mut sink = Sink::new(b"head".to_vec());
        let mut expected = b"head".to_vec();
        for piece in &pieces {
            sink.put(piece);
            expected.extend_from_slice(piece);
        }
        assert_eq!(sink.finish(), expected);
        // A buffer that already holds a long document grows by what is
        // written, and keeps it.
        let mut buf = vec![b'x'; 100_000];
        pretty_at(&mut buf, &[1.5f64, -2.0], 0).expect("json");
        assert_eq!(buf.len(), 100_000 + b"[1.5, -2.0]".len());
        assert_eq!(&buf[100_000..], b"[1.5, -2.0]");
    }

    /// Integers and floats written in place are `serde_json`'s text.
    #[test]
    fn numbers_are_serde_jsons() {
        let mut ints: Vec<u64> = (0..=10_000).collect();
        for k in 1..20 {
            let p = 10u64.pow(k);
            ints.extend([p - 1, p, p + 1]);
        }
        ints.push(u64::MAX);
        let floats = [
            0.0,
            -0.0,
            1.0,
            -0.992_187_5,
            1e16,
            1e-7,
            5e-324,
            f64::MAX,
            0.1,
        ];
        let mut sink = Sink::new(Vec::new());
        let mut expected = Vec::new();
        for &v in &ints {
            sink.put_u64(v);
            sink.put(b",");
            expected.extend_from_slice(serde_json::to_string(&v).expect("json").as_bytes());
            expected.push(b',');
        }
        for &x in &floats {
            sink.put_f64(x);
            sink.put(b",");
            expected.extend_from_slice(serde_json::to_string(&x).expect("json").as_bytes());
            expected.push(b',');
        }
        assert_eq!(
            String::from_utf8(sink.finish()),
            String::from_utf8(expected)
        );
    }

    /// A value written `depth` levels in is, once every later line loses
    /// `depth` indents, exactly what `serde_json` pretty-prints.
    #[test]
    fn nested_pretty_json_is_serde_json_pretty_indented() {
        let value = serde_json::json!({
            "a": [1, 2.5, {"b": [], "c": {}}, [[]], null],
            "name": "x\u{200b}\"y",
            "empty": [],
            "names": ["p", "q"],
            "nested": {"deep": [{"k": [true, false]}, [3, -4]]}
        });
        let mut buf = Vec::new();
        pretty_at(&mut buf, &value, 0).expect("json");
        let whole = String::from_utf8(buf).expect("utf-8");
        // The same value, pretty-printed, arrays of scalars on one line.
        let back: serde_json::Value = serde_json::from_str(&whole).expect("valid JSON");
        assert_eq!(back, value);
        assert!(whole.contains("\"k\": [true, false]"), "{whole}");
        assert!(whole.contains("\n      [3, -4]\n"), "{whole}");
        assert!(
            whole.contains("\"names\": [\n    \"p\",\n    \"q\"\n  ]"),
            "{whole}"
        );
        assert!(whole.contains("\"empty\": [],"), "{whole}");
        for depth in [1, 2, 5, 40] {
            let mut buf = Vec::new();
            pretty_at(&mut buf, &value, depth).expect("json");
            let text = String::from_utf8(buf).expect("utf-8");
            let pad = " ".repeat(2 * depth);
            let expected = whole.replace('\n', &format!("\n{pad}"));
            assert_eq!(text, expected, "depth {depth}");
        }
        // Without arrays of scalars it is serde_json's pretty output.
        let plain = serde_json::json!({"a": {"b": "c", "d": [{"e": "f"}]}, "g": {}});
        let mut buf = Vec::new();
        pretty_at(&mut buf, &plain, 0).expect("json");
        assert_eq!(
            String::from_utf8(buf).expect("utf-8"),
            serde_json::to_string_pretty(&plain).expect("json")
        );
        let mut buf = Vec::new();
        pretty_at(&mut buf, &[0u8; 0], 3).expect("json");
        assert_eq!(buf, b"[]");
    }
}
