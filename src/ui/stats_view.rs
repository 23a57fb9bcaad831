//! Statistics in the tensor view and the whole-file scan (wired to the
//! statistics engine).

use std::sync::Arc;

use eframe::egui;

use super::model::ScanFigures;
use crate::dtype::decode::BitOrder;
use crate::format::Checkpoint;

/// Statistics jobs, cache and scan for one tab.
#[derive(Default)]
pub struct StatsState {}

impl StatsState {
    /// True while a job runs.
    pub fn is_busy(&self) -> bool {
        false
    }

    /// Scan figures per tensor.
    pub fn scan_figures(&self) -> Option<&[Option<ScanFigures>]> {
        None
    }

    /// Collects finished jobs; true when scan figures changed.
    pub fn poll(&mut self, _ck: &Arc<Checkpoint>) -> bool {
        false
    }
}

/// The scan bar.
pub fn scan_bar_ui(
    _ui: &mut egui::Ui,
    _s: &mut StatsState,
    _ck: &Arc<Checkpoint>,
    _repaint: impl Fn() + Send + Sync + 'static,
) {
}

/// The statistics section.
pub fn stats_ui(
    ui: &mut egui::Ui,
    _s: &mut StatsState,
    _ck: &Arc<Checkpoint>,
    _index: usize,
    _order: BitOrder,
    _repaint: impl Fn() + Send + Sync + 'static,
) {
    ui.weak("statistics: wiring in progress");
}
