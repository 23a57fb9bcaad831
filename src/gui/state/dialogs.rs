//! The windows over the tabs: the in-app file picker and the two writing
//! forms (*Export tensor*, *Save as*). Their fields are the forms' inputs,
//! edited by the panels; their jobs run through the runner.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::DialogPurpose;
use crate::dtype::Dtype;
use crate::dtype::convert::{CONVERT_TO, Overflow, is_supported};
use crate::export::{ExportError, ExportReport};
use crate::format::{Checkpoint, CheckpointKind, TensorInfo};
use crate::gui::dialog::DialogResult;
use crate::gui::model::QuantRows;
use crate::gui::task::Task;
use crate::resave::{ResaveError, ResaveReport};

/// One entry of a folder listing.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its full path (what opening it opens).
    pub path: PathBuf,
    /// Its file name, lossily decoded for display.
    pub name: String,
    /// A folder (opens the folder) rather than a file (opens the file).
    pub is_dir: bool,
    /// Size in bytes (0 for folders).
    pub size: u64,
}

/// What a path typed or clicked in the picker turned out to be.
#[derive(Debug, Clone)]
pub enum Listing {
    /// A folder, with its entries (folders first, natural order).
    Folder(Vec<Entry>),
    /// Not a folder: the picker opens it as a checkpoint.
    File(PathBuf),
}

/// The in-app picker, used where no native dialog exists.
pub struct Picker {
    /// What the chosen file is for.
    pub purpose: DialogPurpose,
    /// The folder listed (or being listed).
    pub folder: PathBuf,
    /// Reading the folder; the previous listing stays on show meanwhile.
    pub listing: Task<PathBuf, Listing, String>,
}

impl Picker {
    /// A picker for `purpose` that will list `folder`.
    pub fn new(purpose: DialogPurpose, folder: PathBuf) -> Self {
        Self {
            purpose,
            folder,
            listing: Task::default(),
        }
    }
}

/// The picker's inputs, edited by its panel.
#[derive(Debug, Clone, Default)]
pub struct PickerForm {
    /// The path box, as typed.
    pub path_text: String,
    /// List every file, not only checkpoints.
    pub show_all: bool,
}

/// Which writing form a command is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteForm {
    /// *Export tensor*.
    Export,
    /// *Save as*.
    SaveAs,
}

/// The *Browse…* button of a writing form: the native save dialog runs on a
/// thread; where there is none the user types the path.
#[derive(Debug, Default)]
pub struct Browse {
    /// The dialog while it is shown.
    pub task: Task<(), DialogResult, Infallible>,
    /// The native dialog said it cannot be shown here.
    pub unavailable: bool,
}

/// A file-name-safe form of a tensor name.
fn file_stem(name: &str) -> String {
    let s: String = name
        .chars()
        .take(120)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "tensor".into() } else { s }
}

/// The folder of a checkpoint: where outputs go by default.
fn folder_of(ck: &Checkpoint) -> PathBuf {
    ck.path()
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The *Export tensor* form.
pub struct ExportDialog {
    /// The checkpoint the tensor is in.
    pub ck: Arc<Checkpoint>,
    /// Index into `ck.tensors`.
    pub index: usize,
    /// The tensor's header entry, for the form's title.
    pub info: TensorInfo,
    /// The native save dialog.
    pub browse: Browse,
    /// The export job; its outcome shows under the buttons.
    pub task: Task<(), ExportReport, ExportError>,
    /// The checkpoint's quantized weights, when row `index` is one: its
    /// values are exported (F32), not its first part.
    pub quant: Option<Arc<QuantRows>>,
}

impl ExportDialog {
    /// A form exporting tensor `index` of `ck` next to the checkpoint, as
    /// `.npy`, with its inputs; `None` when there is no such tensor. A row
    /// of a quantized weight of `quant` exports the weight's values.
    pub fn new(
        ck: Arc<Checkpoint>,
        index: usize,
        quant: Option<Arc<QuantRows>>,
    ) -> Option<(Self, ExportForm)> {
        let stored = ck.entry(index)?.1.clone();
        let quant = quant.filter(|q| q.logical_at(index).is_some());
        let info = quant
            .as_ref()
            .and_then(|q| q.logical_at(index))
            .and_then(|lt| {
                TensorInfo::new(lt.name().to_owned(), Dtype::F32, lt.shape().to_vec(), 0)
            })
            .unwrap_or(stored);
        let path = folder_of(&ck)
            .join(format!("{}.npy", file_stem(info.name())))
            .display()
            .to_string();
        let form = ExportForm {
            path,
            raw: false,
            force: false,
        };
        let dialog = Self {
            ck,
            index,
            info,
            browse: Browse::default(),
            task: Task::default(),
            quant,
        };
        Some((dialog, form))
    }

    /// True while the export or the save dialog runs.
    pub fn is_busy(&self) -> bool {
        self.task.is_running() || self.browse.task.is_running()
    }
}

/// The *Export tensor* form's inputs, edited by its panel.
#[derive(Debug, Clone, Default)]
pub struct ExportForm {
    /// The output path as typed; its extension picks the format.
    pub path: String,
    /// Write raw codes (BF16 as uint16, F8 as uint8, …) instead of values.
    pub raw: bool,
    /// Write CSV even above its size limit.
    pub force: bool,
}

/// A dtype conversion choice in the *Save as* form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConversionChoice {
    /// A dtype present in the selection.
    pub from: Dtype,
    /// What it becomes; `None` keeps it.
    pub to: Option<Dtype>,
}

/// The *Save as* form.
pub struct SaveAsDialog {
    /// The checkpoint written from.
    pub ck: Arc<Checkpoint>,
    /// Tensors to write (indices into `ck.tensors`).
    pub selection: Vec<usize>,
    /// Their bytes in all, for the title.
    pub selection_bytes: u64,
    /// The metadata as the file has it, to tell edits from keeps.
    pub original_metadata: BTreeMap<String, String>,
    /// The native save dialog.
    pub browse: Browse,
    /// Why the form's options are invalid, from the last *Save* click.
    pub invalid: Option<String>,
    /// The write job; its outcome shows under the buttons.
    pub task: Task<(), ResaveReport, ResaveError>,
    /// The checkpoint has quantized weights (the form offers to write
    /// their values).
    pub quantized: bool,
}

impl SaveAsDialog {
    /// A form writing `selection` (indices into `ck.tensors`) beside the
    /// checkpoint, keeping its metadata, with its inputs.
    pub fn new(ck: Arc<Checkpoint>, selection: Vec<usize>) -> (Self, SaveAsForm) {
        let stem = match &ck.kind() {
            // Beside the file, or beside the folder of files.
            CheckpointKind::Single | CheckpointKind::Folder => ck
                .path()
                .file_stem()
                .map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned()),
            CheckpointKind::Sharded { .. } => "model".into(),
        };
        let path = folder_of(&ck)
            .join(format!("{stem}-resaved.safetensors"))
            .display()
            .to_string();
        let original_metadata: BTreeMap<String, String> = ck
            .shards()
            .first()
            .and_then(|s| s.file().header().metadata().cloned())
            .unwrap_or_default();
        let metadata = original_metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone(), true))
            .collect();
        let infos: Vec<&TensorInfo> = selection
            .iter()
            .filter_map(|&i| ck.entry(i).map(|(_, info)| info))
            .collect();
        let selection_bytes = infos
            .iter()
            .map(|i| i.nbytes())
            .fold(0, u64::saturating_add);
        let mut dtypes: Vec<Dtype> = infos.iter().map(|i| i.dtype()).collect();
        dtypes.sort_by_key(|d| d.writer_rank());
        dtypes.dedup();
        let conversions = dtypes
            .into_iter()
            .filter(|d| CONVERT_TO.iter().any(|t| is_supported(*d, *t)))
            .map(|from| ConversionChoice { from, to: None })
            .collect();
        let form = SaveAsForm {
            path,
            renames: String::new(),
            metadata,
            new_key: String::new(),
            new_value: String::new(),
            conversions,
            overflow: Overflow::Saturate,
            max_shard: String::new(),
            dequantize: false,
        };
        let dialog = Self {
            ck,
            selection,
            selection_bytes,
            original_metadata,
            browse: Browse::default(),
            invalid: None,
            task: Task::default(),
            quantized: false,
        };
        (dialog, form)
    }

    /// True while the write or the save dialog runs.
    pub fn is_busy(&self) -> bool {
        self.task.is_running() || self.browse.task.is_running()
    }
}

/// The *Save as* form's inputs, edited by its panel.
#[derive(Debug, Clone, Default)]
pub struct SaveAsForm {
    /// The output path as typed.
    pub path: String,
    /// `FROM=TO` lines.
    pub renames: String,
    /// Metadata rows: key, value, keep (unticked rows are removed).
    pub metadata: Vec<(String, String, bool)>,
    /// The key of a row being added.
    pub new_key: String,
    /// The value of a row being added.
    pub new_value: String,
    /// One choice per convertible dtype of the selection.
    pub conversions: Vec<ConversionChoice>,
    /// What F8 does with values beyond its range.
    pub overflow: Overflow,
    /// Re-shard at this size (`5GB`, `5GiB`, bytes); empty writes one file.
    pub max_shard: String,
    /// Write quantized weights as plain tensors of their true values.
    pub dequantize: bool,
}
