//! Records: what a link leaves behind for the user to read later — its line in `--log`, and
//! the `--report` and `--trace` files.
//!
//! It knows where they go and that they never fail a link; their content is `report::record`'s.

use super::Options;
use crate::job::util::whole::write_atomically;
use crate::report::{self, record};
use camino::Utf8Path;

/// Appends the link's line to `--log FILE`, if asked for; best effort.
pub(super) fn log(options: &Options, record: &record::LinkRecord, ok: bool) {
    let Some(path) = &options.log else { return };
    let dir = std::env::current_dir().unwrap_or_default();
    if let Err(e) = record::append_line(path, &record::log_line(record, &dir, ok)) {
        report::warning(&format!("append to the log {path}: {e}"));
    }
}

/// Writes the `--report` and `--trace` files, if asked for: whole (concurrent links may share
/// a path), and best effort (a warning when they cannot be written).
pub(super) fn write_records(options: &Options, record: &record::LinkRecord) {
    let write = |what: &str, path: &Utf8Path, value: serde_json::Value| {
        let text = serde_json::to_string_pretty(&value).unwrap_or_default() + "\n";
        if let Err(e) = write_atomically(path, |f| std::io::Write::write_all(f, text.as_bytes())) {
            report::warning(&format!("write the {what} {path}: {e}"));
        }
    };
    let output = &record.linker_output;
    if let Some(path) = &options.report {
        let value = serde_json::to_value(record).unwrap_or_default();
        write("report", &record::path_for(path, output), value);
    }
    if let Some(path) = &options.trace {
        write(
            "trace",
            &record::path_for(path, output),
            record::trace(record),
        );
    }
}
