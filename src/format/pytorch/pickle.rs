//! The pickle machine (PICKLE.md §2): every opcode of protocols 0 to 5,
//! read into a [`Graph`] of plain values. It imports nothing and calls
//! nothing: a global is a name, a call a record of what would be called.
//! It is iterative (a 100,000-deep list is no deeper for it than a flat
//! one), every length is checked against the bytes left before anything is
//! allocated, and the memory it builds is counted against a budget, so a
//! bomb ends in [`PickleError::TooComplex`], fast. Each opcode reads at
//! least one byte, so a run ends within the input's length.

use std::collections::{BTreeSet, HashMap};

use super::text::{raw_unicode_escape, text_or_bytes, unquote};
use super::value::{Graph, Id, Node};

/// Bytes of values the machine may build for one pickle (nodes, strings,
/// container slots, memo entries).
pub const MAX_BUILT_BYTES: u64 = 512 << 20;

/// Why a pickle cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PickleError {
    /// An opcode that is unknown or does not parse, or input that ends
    /// before `STOP`.
    #[error("invalid pickle at byte {at}: {message}")]
    Invalid {
        /// The opcode's offset in the pickle.
        at: usize,
        /// What is wrong.
        message: String,
    },
    /// What the pickle builds is over the budget.
    #[error("the pickle builds more than {max} bytes of values (at byte {at}); it is refused")]
    TooComplex {
        /// The opcode's offset in the pickle.
        at: usize,
        /// The budget.
        max: u64,
    },
}

impl PickleError {
    /// A stable kind for JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            PickleError::Invalid { .. } => "InvalidPickle",
            PickleError::TooComplex { .. } => "TooComplex",
        }
    }
}

/// A pickle read: its values, the globals it names, and where it ended.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The values, rooted at the pickled object.
    pub graph: Graph,
    /// Every global named, `module.name` as written, sorted, once each
    /// (`?.?` for a `STACK_GLOBAL` whose operands are not both strings).
    pub globals: BTreeSet<String>,
    /// Bytes read, `STOP` included: where a following pickle starts.
    pub end: usize,
}

/// A pickle that could not be read, with the globals it named before it
/// failed (a scanner reports those even then).
#[derive(Debug, Clone)]
pub struct Failed {
    /// Why it stopped.
    pub error: PickleError,
    /// The globals named before.
    pub globals: BTreeSet<String>,
}

/// One stack slot.
#[derive(Debug, Clone, Copy)]
enum Item {
    Value(Id),
    Mark,
}

/// Reads the pickle at the start of `bytes`, within [`MAX_BUILT_BYTES`].
pub fn parse(bytes: &[u8]) -> Result<Parsed, Failed> {
    parse_within(bytes, MAX_BUILT_BYTES)
}

/// [`parse`] within a budget of `max_built` bytes.
pub fn parse_within(bytes: &[u8], max_built: u64) -> Result<Parsed, Failed> {
    let mut m = Machine {
        input: bytes,
        pos: 0,
        at: 0,
        nodes: Vec::new(),
        stack: Vec::new(),
        memo: HashMap::new(),
        globals: BTreeSet::new(),
        built: 0,
        max_built,
    };
    match m.run() {
        Ok(root) => Ok(Parsed {
            graph: Graph {
                nodes: m.nodes,
                root,
            },
            globals: m.globals,
            end: m.pos,
        }),
        Err(error) => {
            let mut globals = m.globals;
            // Over the budget: the values stop being built, but the rest of
            // the stream is still scanned for the globals it names, so that
            // a bomb cannot hide an unsafe global behind it.
            if let PickleError::TooComplex { at, .. } = error {
                scan_globals(bytes, at, &mut globals);
            }
            Err(Failed { error, globals })
        }
    }
}

/// The globals named from byte `from` of `bytes` on, found by walking the
/// opcodes without building anything: `GLOBAL` and `INST` by their two
/// lines, `STACK_GLOBAL` as `?.?` (its operands are not tracked here).
/// Stops at `STOP`, or where an opcode does not parse.
fn scan_globals(bytes: &[u8], from: usize, globals: &mut BTreeSet<String>) {
    let mut at = from;
    let line = |at: &mut usize| -> Option<String> {
        let rest = bytes.get(*at..)?;
        let n = rest.iter().position(|&b| b == b'\n')?;
        *at += n + 1;
        Some(String::from_utf8_lossy(&rest[..n]).into_owned())
    };
    let counted = |at: &mut usize, width: usize| -> Option<()> {
        let len = bytes.get(*at..at.checked_add(width)?)?;
        let n = len.iter().rev().fold(0u64, |a, &x| (a << 8) | u64::from(x));
        *at = at
            .checked_add(width)?
            .checked_add(usize::try_from(n).ok()?)
            .filter(|&end| end <= bytes.len())?;
        Some(())
    };
    while let Some(&op) = bytes.get(at) {
        at += 1;
        let step = match op {
            b'.' => return,
            b'c' | b'i' => line(&mut at).zip(line(&mut at)).map(|(module, name)| {
                globals.insert(format!("{module}.{name}"));
            }),
            0x93 => {
                globals.insert("?.?".to_owned());
                Some(())
            }
            b'('
            | b'0'
            | b'1'
            | b'2'
            | b'N'
            | b'R'
            | b'a'
            | b'b'
            | b'd'
            | b'}'
            | b'e'
            | b'l'
            | b']'
            | b's'
            | b't'
            | b')'
            | b'u'
            | b'Q'
            | b'o'
            | 0x81
            | 0x85..=0x89
            | 0x8f..=0x92
            | 0x94
            | 0x97
            | 0x98 => Some(()),
            b'K' | b'h' | b'q' | 0x80 | 0x82 => {
                at += 1;
                Some(())
            }
            b'M' | 0x83 => {
                at += 2;
                Some(())
            }
            b'J' | b'j' | b'r' | 0x84 => {
                at += 4;
                Some(())
            }
            b'G' | 0x95 => {
                at += 8;
                Some(())
            }
            b'I' | b'L' | b'F' | b'S' | b'V' | b'P' | b'g' | b'p' => line(&mut at).map(|_| ()),
            b'U' | b'C' | 0x8c | 0x8a => counted(&mut at, 1),
            b'T' | b'X' | b'B' | 0x8b => counted(&mut at, 4),
            0x8d | 0x8e | 0x96 => counted(&mut at, 8),
            _ => None,
        };
        if step.is_none() {
            return;
        }
    }
}

struct Machine<'a> {
    input: &'a [u8],
    pos: usize,
    /// The current opcode's offset, for errors.
    at: usize,
    nodes: Vec<Node>,
    stack: Vec<Item>,
    memo: HashMap<u64, Id>,
    globals: BTreeSet<String>,
    built: u64,
    max_built: u64,
}

type Step<T> = Result<T, PickleError>;

impl<'a> Machine<'a> {
    fn invalid<T>(&self, message: impl Into<String>) -> Step<T> {
        Err(PickleError::Invalid {
            at: self.at,
            message: message.into(),
        })
    }

    /// Counts `bytes` against the budget.
    fn spend(&mut self, bytes: u64) -> Step<()> {
        self.built = self.built.saturating_add(bytes);
        if self.built > self.max_built {
            return Err(PickleError::TooComplex {
                at: self.at,
                max: self.max_built,
            });
        }
        Ok(())
    }

    fn take(&mut self, n: u64) -> Step<&'a [u8]> {
        let left = self.input.len() - self.pos;
        let Some(n) = usize::try_from(n).ok().filter(|&n| n <= left) else {
            return self.invalid(format!("{n} bytes are declared but {left} remain"));
        };
        let input = self.input;
        let out = &input[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn uint(&mut self, n: usize) -> Step<u64> {
        let b = self.take(n as u64)?;
        Ok(b.iter().rev().fold(0u64, |a, &x| (a << 8) | u64::from(x)))
    }

    /// A protocol 0 argument: the bytes up to the next newline.
    fn line(&mut self) -> Step<&'a [u8]> {
        let input = self.input;
        let rest = &input[self.pos..];
        let Some(n) = rest.iter().position(|&b| b == b'\n') else {
            return self.invalid("a text argument has no end of line");
        };
        self.pos += n + 1;
        Ok(&rest[..n])
    }

    fn line_text(&mut self) -> Step<String> {
        let l = self.line()?;
        Ok(String::from_utf8_lossy(l).into_owned())
    }

    fn node(&mut self, node: Node) -> Step<Id> {
        let payload = match &node {
            Node::Str(s) => s.len(),
            Node::Bytes(b) => b.len(),
            Node::BigInt(t) => t.len(),
            Node::List(v) | Node::Tuple(v) | Node::Set(v) => v.len() * 4,
            Node::Dict(v) => v.len() * 8,
            Node::Global { module, name } => module.len() + name.len(),
            _ => 0,
        };
        self.spend((std::mem::size_of::<Node>() + payload) as u64)?;
        let Ok(id) = Id::try_from(self.nodes.len()) else {
            return Err(PickleError::TooComplex {
                at: self.at,
                max: self.max_built,
            });
        };
        self.nodes.push(node);
        Ok(id)
    }

    fn push(&mut self, node: Node) -> Step<()> {
        let id = self.node(node)?;
        self.stack.push(Item::Value(id));
        Ok(())
    }

    fn pop(&mut self) -> Step<Id> {
        match self.stack.pop() {
            Some(Item::Value(id)) => Ok(id),
            Some(Item::Mark) => self.invalid("a value was expected, the stack holds a mark"),
            None => self.invalid("the stack is empty"),
        }
    }

    fn top(&self) -> Step<Id> {
        match self.stack.last() {
            Some(Item::Value(id)) => Ok(*id),
            _ => self.invalid("a value was expected on the stack"),
        }
    }

    /// The values above the last mark, which is removed.
    fn pop_mark(&mut self) -> Step<Vec<Id>> {
        let Some(mark) = self.stack.iter().rposition(|i| matches!(i, Item::Mark)) else {
            return self.invalid("no mark on the stack");
        };
        let items = self
            .stack
            .drain(mark..)
            .skip(1)
            .filter_map(|i| match i {
                Item::Value(id) => Some(id),
                Item::Mark => None,
            })
            .collect();
        Ok(items)
    }

    fn global(&mut self, module: String, name: String) -> Step<Id> {
        self.globals.insert(format!("{module}.{name}"));
        self.node(Node::Global { module, name })
    }

    fn call(&mut self, func: Id, args: Id, kwargs: Option<Id>) -> Step<()> {
        self.push(Node::Call {
            func,
            args,
            kwargs,
            state: None,
            items: Vec::new(),
            appended: Vec::new(),
        })
    }

    fn memo_put(&mut self, key: u64) -> Step<()> {
        let id = self.top()?;
        self.spend(48)?;
        self.memo.insert(key, id);
        Ok(())
    }

    fn memo_get(&mut self, key: u64) -> Step<()> {
        let Some(&id) = self.memo.get(&key) else {
            return self.invalid(format!("memo key {key} was never set"));
        };
        self.stack.push(Item::Value(id));
        Ok(())
    }

    /// Adds `values` to the list (or object) `target`; a target that holds
    /// no items takes none (its pickle is not one a checkpoint writes).
    fn append(&mut self, target: Id, values: Vec<Id>) -> Step<()> {
        self.spend(values.len() as u64 * 4)?;
        match self.nodes.get_mut(target as usize) {
            Some(Node::List(v) | Node::Set(v)) => v.extend(values),
            Some(Node::Call { appended, .. }) => appended.extend(values),
            _ => {}
        }
        Ok(())
    }

    /// Sets `pairs` on the dict (or object) `target`.
    fn set_items(&mut self, target: Id, values: &[Id]) -> Step<()> {
        if !values.len().is_multiple_of(2) {
            return self.invalid("SETITEMS with an odd count of keys and values");
        }
        self.spend(values.len() as u64 * 4)?;
        let pairs = values.chunks_exact(2).map(|p| (p[0], p[1]));
        if let Some(Node::Dict(v) | Node::Call { items: v, .. }) =
            self.nodes.get_mut(target as usize)
        {
            v.extend(pairs);
        }
        Ok(())
    }

    fn run(&mut self) -> Step<Id> {
        loop {
            self.at = self.pos;
            let Some(&op) = self.input.get(self.pos) else {
                return self.invalid("the pickle ends before its STOP opcode");
            };
            self.pos += 1;
            if op == b'.' {
                return self.pop();
            }
            self.step(op)?;
        }
    }

    #[allow(
        clippy::too_many_lines,
        reason = "one arm an opcode, as pickletools lists them, reads best in one match"
    )]
    fn step(&mut self, op: u8) -> Step<()> {
        match op {
            // Framing and protocol.
            0x80 => {
                let v = self.uint(1)?;
                if v > 5 {
                    return self.invalid(format!("protocol {v} is not one of 0 to 5"));
                }
            }
            0x95 => {
                self.uint(8)?;
            }
            // The stack.
            b'(' => self.stack.push(Item::Mark),
            b'0' => {
                if self.stack.pop().is_none() {
                    return self.invalid("POP on an empty stack");
                }
            }
            b'1' => {
                self.pop_mark()?;
            }
            b'2' => {
                let id = self.top()?;
                self.stack.push(Item::Value(id));
            }
            // Scalars.
            b'N' => self.push(Node::None)?,
            0x88 => self.push(Node::Bool(true))?,
            0x89 => self.push(Node::Bool(false))?,
            b'I' => {
                let l = self.line_text()?;
                let node = match l.as_str() {
                    "00" => Node::Bool(false),
                    "01" => Node::Bool(true),
                    t => self.decimal(t)?,
                };
                self.push(node)?;
            }
            b'L' => {
                let l = self.line_text()?;
                let node = self.decimal(l.trim_end_matches('L'))?;
                self.push(node)?;
            }
            b'J' => {
                let v = self.uint(4)? as u32;
                self.push(Node::Int(i64::from(v as i32)))?;
            }
            b'K' => {
                let v = self.uint(1)?;
                self.push(Node::Int(v as i64))?;
            }
            b'M' => {
                let v = self.uint(2)?;
                self.push(Node::Int(v as i64))?;
            }
            0x8a => {
                let n = self.uint(1)?;
                let node = self.long(n)?;
                self.push(node)?;
            }
            0x8b => {
                let n = self.uint(4)? as u32;
                if n > i32::MAX as u32 {
                    return self.invalid("LONG4 with a negative length");
                }
                let node = self.long(u64::from(n))?;
                self.push(node)?;
            }
            b'F' => {
                let l = self.line_text()?;
                let Ok(v) = l.trim().parse::<f64>() else {
                    return self.invalid(format!("FLOAT {l:?} is not a number"));
                };
                self.push(Node::Float(v))?;
            }
            b'G' => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                self.push(Node::Float(f64::from_be_bytes(a)))?;
            }
            // Strings and bytes.
            b'S' => {
                let l = self.line()?.to_vec();
                let Some(inner) = unquote(&l) else {
                    return self.invalid("STRING is not a quoted string");
                };
                self.push(text_or_bytes(&inner))?;
            }
            b'T' => self.counted(4, Kind::Text)?,
            b'U' => self.counted(1, Kind::Text)?,
            b'V' => {
                let l = self.line()?.to_vec();
                self.push(Node::Str(raw_unicode_escape(&l)))?;
            }
            b'X' => self.counted(4, Kind::Unicode)?,
            0x8c => self.counted(1, Kind::Unicode)?,
            0x8d => self.counted(8, Kind::Unicode)?,
            b'B' => self.counted(4, Kind::Bytes)?,
            b'C' => self.counted(1, Kind::Bytes)?,
            0x8e | 0x96 => self.counted(8, Kind::Bytes)?,
            // Containers.
            b']' => self.push(Node::List(Vec::new()))?,
            b'}' => self.push(Node::Dict(Vec::new()))?,
            b')' => self.push(Node::Tuple(Vec::new()))?,
            0x8f => self.push(Node::Set(Vec::new()))?,
            b'l' => {
                let v = self.pop_mark()?;
                self.push(Node::List(v))?;
            }
            b't' => {
                let v = self.pop_mark()?;
                self.push(Node::Tuple(v))?;
            }
            0x91 => {
                let v = self.pop_mark()?;
                self.push(Node::Set(v))?;
            }
            b'd' => {
                let v = self.pop_mark()?;
                if v.len() % 2 != 0 {
                    return self.invalid("DICT with an odd count of keys and values");
                }
                let pairs = v.chunks_exact(2).map(|p| (p[0], p[1])).collect();
                self.push(Node::Dict(pairs))?;
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                if self.stack.len() < n {
                    return self.invalid("TUPLE1/2/3 on too short a stack");
                }
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(self.pop()?);
                }
                v.reverse();
                self.push(Node::Tuple(v))?;
            }
            b'a' => {
                let v = self.pop()?;
                let target = self.top()?;
                self.append(target, vec![v])?;
            }
            b'e' | 0x90 => {
                let v = self.pop_mark()?;
                let target = self.top()?;
                self.append(target, v)?;
            }
            b's' => {
                let value = self.pop()?;
                let key = self.pop()?;
                let target = self.top()?;
                self.set_items(target, &[key, value])?;
            }
            b'u' => {
                let v = self.pop_mark()?;
                let target = self.top()?;
                self.set_items(target, &v)?;
            }
            // Globals and calls: names and records, never imports or calls.
            b'c' => {
                let module = self.line_text()?;
                let name = self.line_text()?;
                let id = self.global(module, name)?;
                self.stack.push(Item::Value(id));
            }
            0x93 => {
                let name = self.pop()?;
                let module = self.pop()?;
                let (m, n) = match (self.str_at(module), self.str_at(name)) {
                    (Some(m), Some(n)) => (m, n),
                    _ => ("?".to_owned(), "?".to_owned()),
                };
                let id = self.global(m, n)?;
                self.stack.push(Item::Value(id));
            }
            b'i' => {
                let module = self.line_text()?;
                let name = self.line_text()?;
                let args = self.pop_mark()?;
                let func = self.global(module, name)?;
                let args = self.node(Node::Tuple(args))?;
                self.call(func, args, None)?;
            }
            b'o' => {
                let mut v = self.pop_mark()?;
                if v.is_empty() {
                    return self.invalid("OBJ with no class");
                }
                let func = v.remove(0);
                let args = self.node(Node::Tuple(v))?;
                self.call(func, args, None)?;
            }
            b'R' | 0x81 => {
                let args = self.pop()?;
                let func = self.pop()?;
                self.call(func, args, None)?;
            }
            0x92 => {
                let kwargs = self.pop()?;
                let args = self.pop()?;
                let func = self.pop()?;
                self.call(func, args, Some(kwargs))?;
            }
            b'b' => {
                let state = self.pop()?;
                let target = self.top()?;
                if let Some(Node::Call { state: s, .. }) = self.nodes.get_mut(target as usize) {
                    *s = Some(state);
                }
            }
            0x82..=0x84 => {
                let width = match op {
                    0x82 => 1,
                    0x83 => 2,
                    _ => 4,
                };
                let code = self.uint(width)?;
                let id = self.global("copyreg".into(), format!("extension_{code}"))?;
                self.stack.push(Item::Value(id));
            }
            // The memo.
            b'p' => {
                let l = self.line_text()?;
                let Ok(k) = l.trim().parse::<u64>() else {
                    return self.invalid(format!("PUT {l:?} is not an index"));
                };
                self.memo_put(k)?;
            }
            b'q' => {
                let k = self.uint(1)?;
                self.memo_put(k)?;
            }
            b'r' => {
                let k = self.uint(4)?;
                self.memo_put(k)?;
            }
            0x94 => {
                let k = self.memo.len() as u64;
                self.memo_put(k)?;
            }
            b'g' => {
                let l = self.line_text()?;
                let Ok(k) = l.trim().parse::<u64>() else {
                    return self.invalid(format!("GET {l:?} is not an index"));
                };
                self.memo_get(k)?;
            }
            b'h' => {
                let k = self.uint(1)?;
                self.memo_get(k)?;
            }
            b'j' => {
                let k = self.uint(4)?;
                self.memo_get(k)?;
            }
            // Persistent ids: what names a storage.
            b'P' => {
                let l = self.line_text()?;
                let id = self.node(Node::Str(l))?;
                self.push(Node::PersId(id))?;
            }
            b'Q' => {
                let id = self.pop()?;
                self.push(Node::PersId(id))?;
            }
            // Out-of-band buffers: a checkpoint file has none.
            0x97 => return self.invalid("NEXT_BUFFER: the pickle asks for an out-of-band buffer"),
            0x98 => {
                self.top()?;
            }
            other => return self.invalid(format!("unknown opcode 0x{other:02x}")),
        }
        Ok(())
    }

    fn str_at(&self, id: Id) -> Option<String> {
        match self.nodes.get(id as usize)? {
            Node::Str(s) => Some(s.clone()),
            _ => None,
        }
    }

    /// A decimal integer as protocol 0 writes it.
    fn decimal(&self, text: &str) -> Step<Node> {
        let t = text.trim();
        if let Ok(v) = t.parse::<i64>() {
            return Ok(Node::Int(v));
        }
        let digits = t.strip_prefix('-').unwrap_or(t);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return self.invalid(format!("{text:?} is not an integer"));
        }
        Ok(Node::BigInt(t.to_owned()))
    }

    /// `n` little-endian two's-complement bytes (LONG1, LONG4).
    fn long(&mut self, n: u64) -> Step<Node> {
        let b = self.take(n)?;
        if b.len() > 16 {
            return Ok(Node::BigInt(format!("a {}-byte integer", b.len())));
        }
        if b.len() > 8 {
            let fill = if b[b.len() - 1] & 0x80 != 0 { 0xff } else { 0 };
            let mut a = [fill; 16];
            a[..b.len()].copy_from_slice(b);
            return Ok(Node::BigInt(i128::from_le_bytes(a).to_string()));
        }
        let Some(&last) = b.last() else {
            return Ok(Node::Int(0));
        };
        let fill = if last & 0x80 != 0 { 0xff } else { 0 };
        let mut a = [fill; 8];
        a[..b.len()].copy_from_slice(b);
        Ok(Node::Int(i64::from_le_bytes(a)))
    }

    /// A string or bytes with a length field of `width` bytes.
    fn counted(&mut self, width: usize, kind: Kind) -> Step<()> {
        let n = self.uint(width)?;
        if width == 4 && matches!(kind, Kind::Text) && n > i32::MAX as u64 {
            return self.invalid("BINSTRING with a negative length");
        }
        let b = self.take(n)?.to_vec();
        let node = match kind {
            Kind::Bytes => Node::Bytes(b),
            Kind::Text => text_or_bytes(&b),
            Kind::Unicode => Node::Str(String::from_utf8_lossy(&b).into_owned()),
        };
        self.push(node)
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// `bytes`.
    Bytes,
    /// A Python 2 `str`: text when it is UTF-8.
    Text,
    /// A Python 3 `str`, UTF-8.
    Unicode,
}
