//! Build file: writes the jobs as a build.ninja or a Makefile through askama templates.
//!
//! It knows each file's layout and asks `escape` for every string it writes, streaming the
//! escaped text into the file; it does not know where the file goes, whether inputs exist, or
//! how the build tool is run.

use crate::job::parse::{Job, JobFile};
use crate::render::escape;
use askama::Template;
use std::fmt::{self, Display, Write};

/// The two build-file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Ninja,
    Make,
}

impl Format {
    pub fn tool(self) -> &'static str {
        match self {
            Format::Ninja => "ninja",
            Format::Make => "make",
        }
    }

    pub fn file_name(self) -> &'static str {
        match self {
            Format::Ninja => "build.ninja",
            Format::Make => "Makefile",
        }
    }
}

/// What a run puts in the file instead of the commands: a private directory for ninja's state,
/// and the launcher (`LAUNCHER... N`, e.g. `dtlto-bridge __job DIR N`) each job runs, which asks
/// the run what to do.
pub struct RunHooks {
    pub state_dir: String,
    pub launcher: Vec<String>,
}

pub struct Options<'a> {
    /// Words of the wrapper (distcc, icecc, ...), already split.
    pub wrapper: &'a [String],
    /// Names the job file in the header comment.
    pub source: &'a str,
    pub run: Option<RunHooks>,
    /// The order of the jobs in the file, as indices; None for the job file's order.
    pub order: Option<Vec<usize>>,
}

/// Text a closure writes, as the templates print it: built in a reused buffer with no dynamic
/// dispatch, then handed to the file in one piece (askama's `FastWritable`; `Display` too).
struct Show<F>(F);

thread_local! {
    static BUFFER: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

impl<F: Fn(&mut String) -> fmt::Result> Show<F> {
    fn emit(&self, dest: &mut dyn Write) -> fmt::Result {
        BUFFER.with_borrow_mut(|buf| {
            buf.clear();
            (self.0)(buf)?;
            dest.write_str(buf)
        })
    }
}

impl<F: Fn(&mut String) -> fmt::Result> askama::FastWritable for Show<F> {
    fn write_into(&self, dest: &mut dyn Write, _: &dyn askama::Values) -> askama::Result<()> {
        Ok(self.emit(dest)?)
    }
}

impl<F: Fn(&mut String) -> fmt::Result> Display for Show<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.emit(f)
    }
}

/// A build file checked and ready to be written: every string in it can be expressed.
pub enum Prepared<'a> {
    Ninja(Ninja<'a>),
    Make(Make<'a>),
}

impl Prepared<'_> {
    /// Writes the file to `out`, without building it in memory first.
    pub fn write_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        use std::io::Write;
        let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
        match self {
            Prepared::Ninja(t) => t.write_into(&mut out)?,
            Prepared::Make(t) => t.write_into(&mut out)?,
        }
        out.flush()
    }
}

/// Checks and escapes the jobs for `format`, or says which string that format cannot express.
pub fn prepare<'a>(
    format: Format,
    file: &'a JobFile<'a>,
    opts: &'a Options<'a>,
) -> Result<Prepared<'a>, String> {
    Ok(match format {
        Format::Ninja => Prepared::Ninja(ninja(file, opts)?),
        Format::Make => Prepared::Make(make(file, opts)?),
    })
}

/// Renders the jobs in `format` into a string, or says which string that format cannot express.
pub fn render(format: Format, file: &JobFile<'_>, opts: &Options<'_>) -> Result<String, String> {
    let mut text = Vec::new();
    prepare(format, file, opts)?
        .write_to(&mut text)
        .map_err(|e| format!("render {}: {e}", format.file_name()))?;
    String::from_utf8(text).map_err(|e| format!("render {}: {e}", format.file_name()))
}

/// The launcher's words for job `index` in a run.
fn launcher_words(run: &RunHooks, index: usize) -> Vec<String> {
    let mut words = run.launcher.clone();
    words.push(index.to_string());
    words
}

/// Whether two jobs share the same list of common words (as every job of a parsed file does).
fn same_common(a: &Job<'_>, b: &Job<'_>) -> bool {
    std::sync::Arc::ptr_eq(&a.command.common, &b.command.common)
}

/// Checks, up front, every job's paths with `path_problem` and every word of its command (and
/// the launcher's and wrapper's) for what no build file can hold, so that the file can then be
/// written job by job without failing or being held in memory. Words jobs share are checked once.
fn check_jobs(
    file: &JobFile<'_>,
    opts: &Options<'_>,
    name: &str,
    path_problem: impl Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let words = |w: &mut dyn Iterator<Item = &str>| {
        for word in w {
            if let Some(p) = escape::line_problem(word, name) {
                return Some(p);
            }
        }
        None
    };
    // A string borrowed from a job file's text cannot hold a line break (JSON escapes them).
    let owned = |w: &'_ crate::job::parse::Str| matches!(w, std::borrow::Cow::Owned(_));
    if let Some(p) = opts
        .run
        .as_ref()
        .and_then(|r| words(&mut r.launcher.iter().map(String::as_str)))
    {
        return Err(p);
    }
    if let Some(p) = words(&mut opts.wrapper.iter().map(String::as_str)) {
        return Err(p);
    }
    for (i, job) in file.jobs.iter().enumerate() {
        let paths = job.outputs.iter().chain(&job.inputs);
        if let Some(p) = paths.filter_map(|p| path_problem(p)).next() {
            return Err(p);
        }
        let problem = crate::job::wrapper::placeholder_problem(opts.wrapper, &job.inputs)
            .or_else(|| crate::job::wrapper::placeholder_problem(opts.wrapper, &job.outputs));
        if let Some(p) = problem {
            return Err(format!("job {i}: {p}"));
        }
        let common = if i > 0 && same_common(job, &file.jobs[i - 1]) {
            None
        } else {
            words(
                &mut job
                    .command
                    .common
                    .iter()
                    .filter(|w| owned(w))
                    .map(|w| w.as_ref()),
            )
        };
        if let Some(p) = common.or_else(|| {
            words(
                &mut job
                    .command
                    .own
                    .iter()
                    .filter(|w| owned(w))
                    .map(|w| w.as_ref()),
            )
        }) {
            return Err(p);
        }
    }
    Ok(())
}

/// The words every job's command starts with (lld's `common.args`), written once in the file
/// as a variable, when every job shares them.
fn common_words<'f>(file: &'f JobFile<'f>) -> Option<&'f [crate::job::parse::Str<'f>]> {
    let first = file.jobs.first()?;
    let shared =
        !first.command.common.is_empty() && file.jobs.iter().all(|j| same_common(j, first));
    shared.then_some(&*first.command.common)
}

/// Text a template prints, written by a closure into a reused buffer.
fn text<F: Fn(&mut String) -> fmt::Result>(f: F) -> Show<F> {
    Show(f)
}

/// The jobs of a file in the order they are written.
struct Jobs<'a> {
    file: &'a JobFile<'a>,
    opts: &'a Options<'a>,
    order: Vec<usize>,
    /// For a Makefile: whether make can name all paths of each job (by index); if not, the job
    /// gets a phony target.
    named: Vec<bool>,
    /// Whether the common words are in a variable (each job then writes its own words only).
    common: bool,
}

impl<'a> Jobs<'a> {
    fn new(file: &'a JobFile<'a>, opts: &'a Options<'a>, named: Vec<bool>) -> Jobs<'a> {
        let order = match &opts.order {
            Some(order) => order.clone(),
            None => (0..file.jobs.len()).collect(),
        };
        Jobs {
            file,
            opts,
            order,
            named,
            common: opts.run.is_none() && common_words(file).is_some(),
        }
    }

    fn len(&self) -> usize {
        self.order.len()
    }

    fn each(&self) -> impl Iterator<Item = (usize, &'a Job<'a>)> + '_ {
        self.order.iter().map(move |&i| (i, &self.file.jobs[i]))
    }
}

#[derive(Template)]
#[template(path = "build.ninja", escape = "none")]
pub struct Ninja<'a> {
    version: &'static str,
    source: String,
    linker_output: String,
    builddir: Option<String>,
    run: bool,
    dist_cc: String,
    /// The words every command starts with, escaped (empty when they are in each job's args).
    common: String,
    all: Jobs<'a>,
}

impl Ninja<'_> {
    fn jobs(&self) -> impl Iterator<Item = NinjaJob<'_>> + '_ {
        self.all.each().map(|(index, job)| NinjaJob {
            index,
            job,
            opts: self.all.opts,
            own_only: self.all.common,
        })
    }
}

/// One job, escaped for build.ninja as the file is written.
struct NinjaJob<'a> {
    index: usize,
    job: &'a Job<'a>,
    opts: &'a Options<'a>,
    /// Whether its args are its own words alone (the common words are in `$common`).
    own_only: bool,
}

impl NinjaJob<'_> {
    fn outputs(&self) -> Show<impl Fn(&mut String) -> fmt::Result + '_> {
        text(move |f| {
            for (i, p) in self.job.outputs.iter().enumerate() {
                if i > 0 {
                    f.push(' ');
                }
                escape::write_ninja_path(f, p)?;
            }
            Ok(())
        })
    }

    /// The inputs, each on a line of its own: ` $` then `    INPUT` per input.
    fn input_lines(&self) -> Show<impl Fn(&mut String) -> fmt::Result + '_> {
        text(move |f| {
            for p in &self.job.inputs {
                f.push_str(" $\n    ");
                escape::write_ninja_path(f, p)?;
            }
            Ok(())
        })
    }

    fn args(&self) -> Show<impl Fn(&mut String) -> fmt::Result + '_> {
        text(move |f| {
            let command = &self.job.command;
            if self.own_only {
                escape::write_words(&mut escape::Dollars(f), &command.own, false)
            } else {
                escape::write_words(&mut escape::Dollars(f), command, true)
            }
        })
    }

    /// The wrapper of this job alone, when it names the job's inputs or outputs (the file's
    /// `dist_cc` cannot).
    fn dist_cc(&self) -> Option<Show<impl Fn(&mut String) -> fmt::Result + '_>> {
        if self.opts.run.is_some() || !crate::job::wrapper::has_placeholders(self.opts.wrapper) {
            return None;
        }
        let words =
            crate::job::wrapper::expand(self.opts.wrapper, &self.job.inputs, &self.job.outputs);
        Some(text(move |f| {
            escape::write_words(&mut escape::Dollars(f), &words, true)
        }))
    }

    fn launch(&self) -> Show<impl Fn(&mut String) -> fmt::Result + '_> {
        let words = self
            .opts
            .run
            .as_ref()
            .map(|r| launcher_words(r, self.index))
            .unwrap_or_default();
        text(move |f| escape::write_words(&mut escape::Dollars(f), &words, true))
    }
}

fn ninja<'a>(file: &'a JobFile<'a>, opts: &'a Options<'a>) -> Result<Ninja<'a>, String> {
    check_jobs(file, opts, "build.ninja", escape::ninja_path_problem)?;
    Ok(Ninja {
        version: env!("CARGO_PKG_VERSION"),
        source: escape::comment(opts.source),
        linker_output: escape::comment(&file.linker_output),
        builddir: match &opts.run {
            Some(run) => Some(escape::ninja_value(&run.state_dir)?),
            None => None,
        },
        run: opts.run.is_some(),
        dist_cc: escape::ninja_value(&escape::shell_line(opts.wrapper))?,
        common: match common_words(file) {
            Some(words) if opts.run.is_none() => escape::ninja_value(&escape::shell_line(words))?,
            _ => String::new(),
        },
        all: Jobs::new(file, opts, Vec::new()),
    })
}

#[derive(Template)]
#[template(path = "Makefile", escape = "none")]
pub struct Make<'a> {
    version: &'static str,
    source: String,
    linker_output: String,
    run: bool,
    dist_cc: String,
    /// The words every command starts with, escaped (None when they are in each recipe).
    common: Option<String>,
    all: Jobs<'a>,
}

impl Make<'_> {
    fn jobs(&self) -> impl Iterator<Item = MakeJob<'_>> + '_ {
        self.all.each().map(|(index, job)| MakeJob {
            index,
            job,
            opts: self.all.opts,
            own_only: self.all.common,
            named: self.all.named[index],
        })
    }

    fn phony(&self) -> impl Iterator<Item = String> + '_ {
        self.jobs()
            .filter(|j| !j.named)
            .map(|j| format!("dtlto-bridge-job-{}", j.index))
    }
}

/// One job, escaped for a Makefile as the file is written.
struct MakeJob<'a> {
    index: usize,
    job: &'a Job<'a>,
    opts: &'a Options<'a>,
    /// Whether its recipe holds its own words alone (the common ones are in a variable).
    own_only: bool,
    /// Whether make can name all its paths; if not, it gets a phony target.
    named: bool,
}

impl MakeJob<'_> {
    /// The output files, or `dtlto-bridge-job-N` when make cannot name them all.
    fn target(&self) -> Show<impl Fn(&mut String) -> fmt::Result + '_> {
        text(move |f| {
            if !self.named {
                return write!(f, "dtlto-bridge-job-{}", self.index);
            }
            for (i, p) in self.job.outputs.iter().enumerate() {
                if i > 0 {
                    f.push(' ');
                }
                escape::write_make_path(f, p)?;
            }
            Ok(())
        })
    }

    /// `:`, or ` &:` when one recipe makes several outputs.
    fn colon(&self) -> &'static str {
        if self.named && self.job.outputs.len() > 1 {
            " &:"
        } else {
            ":"
        }
    }

    /// The prerequisites, each on a line of its own: ` \` then `    INPUT` per input.
    fn prereq_lines(&self) -> Show<impl Fn(&mut String) -> fmt::Result + '_> {
        text(move |f| {
            if self.named {
                for p in &self.job.inputs {
                    f.push_str(" \\\n    ");
                    escape::write_make_path(f, p)?;
                }
            }
            Ok(())
        })
    }

    /// For a phony job: its exact inputs, shell-quoted, for the reader.
    fn quoted_inputs(&self) -> Option<impl Display + '_> {
        (!self.named).then(|| escape::tail(&self.job.inputs))
    }

    fn quoted_outputs(&self) -> impl Display + '_ {
        escape::tail(&self.job.outputs)
    }

    /// The recipe: the launcher in a run, else the wrapper and the command.
    fn recipe(&self) -> Show<impl Fn(&mut String) -> fmt::Result + '_> {
        let launcher = self
            .opts
            .run
            .as_ref()
            .map(|r| launcher_words(r, self.index));
        // A wrapper that names the job's inputs or outputs is this job's alone.
        let wrapper = crate::job::wrapper::has_placeholders(self.opts.wrapper).then(|| {
            crate::job::wrapper::expand(self.opts.wrapper, &self.job.inputs, &self.job.outputs)
        });
        let dist_cc = move |f: &mut String| -> fmt::Result {
            match &wrapper {
                Some(words) => {
                    escape::write_recipe_line(&mut escape::Dollars(&mut *f), words)?;
                    f.push(' ');
                    Ok(())
                }
                None => {
                    f.push_str("$(DIST_CC) ");
                    Ok(())
                }
            }
        };
        text(move |f| match &launcher {
            Some(words) => escape::write_recipe_line(&mut escape::Dollars(f), words),
            None if self.own_only => {
                dist_cc(f)?;
                f.push_str("$(DTLTO_BRIDGE_COMMON) ");
                escape::write_words(&mut escape::Dollars(f), &self.job.command.own, false)
            }
            None => {
                dist_cc(f)?;
                escape::write_recipe_line(&mut escape::Dollars(f), &self.job.command)
            }
        })
    }
}

fn make<'a>(file: &'a JobFile<'a>, opts: &'a Options<'a>) -> Result<Make<'a>, String> {
    check_jobs(file, opts, "a Makefile", |_| None)?;
    Ok(Make {
        version: env!("CARGO_PKG_VERSION"),
        source: escape::comment(opts.source),
        linker_output: escape::comment(&file.linker_output),
        run: opts.run.is_some(),
        dist_cc: escape::make_value(&escape::shell_line_for_recipe(opts.wrapper))?,
        common: match common_words(file) {
            Some(words) if opts.run.is_none() => {
                Some(escape::make_value(&escape::shell_line_for_recipe(words))?)
            }
            _ => None,
        },
        all: Jobs::new(
            file,
            opts,
            file.jobs
                .iter()
                .map(|job| {
                    job.outputs
                        .iter()
                        .chain(&job.inputs)
                        .all(|p| escape::make_path_ok(p))
                })
                .collect(),
        ),
    })
}

/// The requested backend, or ninja when `ninja_found`, else make.
pub fn choose_backend(requested: Option<Format>, ninja_found: bool) -> Format {
    match requested {
        Some(f) => f,
        None if ninja_found => Format::Ninja,
        None => Format::Make,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_defaults_to_ninja_when_found() {
        assert_eq!(choose_backend(None, true), Format::Ninja);
        assert_eq!(choose_backend(None, false), Format::Make);
        assert_eq!(choose_backend(Some(Format::Make), true), Format::Make);
    }
}
