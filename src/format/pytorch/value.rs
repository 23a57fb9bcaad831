//! What the pickle machine builds: a graph of plain values in one arena,
//! nodes referring to each other by index, so that an object the pickle
//! shares (through its memo or `DUP`) is one node however often it is
//! referred to, and nothing is ever expanded into a tree. A global is only
//! a name; a call of one (`REDUCE`, `NEWOBJ`, `INST`, `OBJ`) is only a
//! record of the callable and its arguments.

/// A node's index in [`Graph::nodes`].
pub type Id = u32;

/// One value.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// `None`.
    None,
    /// A bool.
    Bool(bool),
    /// An integer that fits 64 bits.
    Int(i64),
    /// An integer that does not: its decimal text (or, beyond 128 bits,
    /// how many bytes it has).
    BigInt(String),
    /// A float.
    Float(f64),
    /// A text string.
    Str(String),
    /// A byte string (`bytes`, `bytearray`, a protocol 0 `str`).
    Bytes(Vec<u8>),
    /// A list.
    List(Vec<Id>),
    /// A tuple.
    Tuple(Vec<Id>),
    /// A dict, in insertion order (a key set twice keeps its first place).
    Dict(Vec<(Id, Id)>),
    /// A set or frozenset.
    Set(Vec<Id>),
    /// A global, by name: `module.name` as written. Never imported.
    Global {
        /// The module as written (`__builtin__` stays `__builtin__`).
        module: String,
        /// The name in it.
        name: String,
    },
    /// A call of a callable with arguments (`REDUCE`, `NEWOBJ`, `INST`,
    /// `OBJ`), never made; `state` is what `BUILD` gave it.
    Call {
        /// The callable (a node, normally a global).
        func: Id,
        /// The arguments (a tuple node).
        args: Id,
        /// Keyword arguments (`NEWOBJ_EX`).
        kwargs: Option<Id>,
        /// The state `BUILD` set, if any.
        state: Option<Id>,
        /// Items `SETITEM(S)` set on it (an `OrderedDict()` is filled so).
        items: Vec<(Id, Id)>,
        /// Items `APPEND(S)` added to it.
        appended: Vec<Id>,
    },
    /// A persistent id (`PERSID`, `BINPERSID`): what names a storage.
    PersId(Id),
}

/// The values of one pickle.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Every node; [`Id`]s index it.
    pub nodes: Vec<Node>,
    /// The pickled object.
    pub root: Id,
}

impl Graph {
    /// The node `id` (`None` for an index out of range, which a graph the
    /// machine built never holds).
    pub fn get(&self, id: Id) -> Option<&Node> {
        self.nodes.get(id as usize)
    }

    /// The text of a string node.
    pub fn str_of(&self, id: Id) -> Option<&str> {
        match self.get(id)? {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value of an integer node.
    pub fn int_of(&self, id: Id) -> Option<i64> {
        match self.get(id)? {
            Node::Int(i) => Some(*i),
            Node::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The elements of a tuple or list node.
    pub fn items_of(&self, id: Id) -> Option<&[Id]> {
        match self.get(id)? {
            Node::Tuple(v) | Node::List(v) | Node::Set(v) => Some(v),
            _ => None,
        }
    }

    /// A `torch.Size` (a call of the global with one tuple), or a plain
    /// tuple or list of non-negative integers.
    pub fn size_of(&self, id: Id) -> Option<Vec<u64>> {
        let items = match self.get(id)? {
            Node::Call { func, args, .. } => {
                if self.global_of(*func)? != ("torch", "Size") {
                    return None;
                }
                match self.items_of(*args)? {
                    [] => &[][..],
                    [inner] => self.items_of(*inner)?,
                    _ => return None,
                }
            }
            Node::Tuple(v) | Node::List(v) => v.as_slice(),
            _ => return None,
        };
        items
            .iter()
            .map(|&i| self.int_of(i).and_then(|n| u64::try_from(n).ok()))
            .collect()
    }

    /// `module.name` of a global node.
    pub fn global_of(&self, id: Id) -> Option<(&str, &str)> {
        match self.get(id)? {
            Node::Global { module, name } => Some((module, name)),
            _ => None,
        }
    }
}
