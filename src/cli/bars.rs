//! Progress bars (indicatif) for the library's [`Progress`] reports.

use edudb::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Draws one bar on stderr per long operation; hidden when asked or when
/// stderr is not a terminal.
pub struct Bars {
    bar: ProgressBar,
}

impl Bars {
    /// A bar sink; `hidden` suppresses all drawing.
    pub fn new(hidden: bool) -> Bars {
        let target = if hidden {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        };
        Bars {
            bar: ProgressBar::with_draw_target(None, target),
        }
    }
}

impl Progress for Bars {
    fn start(&self, what: &str, total: u64) {
        let template = if what == "ingest" {
            "{prefix} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta} {wide_msg}"
        } else {
            "{prefix} [{bar:40}] {pos}/{len} eta {eta} {wide_msg}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            self.bar.set_style(style.progress_chars("=> "));
        }
        self.bar.set_prefix(what.to_owned());
        self.bar.set_length(total);
        self.bar.set_position(0);
    }

    fn advance(&self, units: u64, item: &str) {
        self.bar.inc(units);
        self.bar.set_message(item.to_owned());
    }

    fn working_on(&self, what: &str) {
        self.bar.set_message(what.to_owned());
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
