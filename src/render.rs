//! Render: writes the jobs as a build.ninja or a Makefile through askama templates.
//!
//! It knows each file's layout and asks `escape` for every string it writes; it does not
//! know where the file goes, whether inputs exist, or how the build tool is run.

use crate::escape;
use crate::parse::{Job, JobFile};
use askama::Template;

/// The two build-file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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

/// What a run adds to the file: a private directory for ninja's state, and the per-job
/// launcher (`dtlto-bridge __job DIR N --local K --output OUT... --`) that takes a slot, runs the
/// job, falls back to a local run when the wrapper fails, and records the outcome.
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

impl Options<'_> {
    fn ordered<'f>(&self, file: &'f JobFile) -> Vec<(usize, &'f Job)> {
        match &self.order {
            Some(order) => order.iter().map(|&i| (i, &file.jobs[i])).collect(),
            None => file.jobs.iter().enumerate().collect(),
        }
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
    file: &'a JobFile,
    opts: &'a Options<'a>,
) -> Result<Prepared<'a>, String> {
    Ok(match format {
        Format::Ninja => Prepared::Ninja(ninja(file, opts)?),
        Format::Make => Prepared::Make(make(file, opts)?),
    })
}

/// Renders the jobs in `format` into a string, or says which string that format cannot express.
pub fn render(format: Format, file: &JobFile, opts: &Options<'_>) -> Result<String, String> {
    let mut text = Vec::new();
    prepare(format, file, opts)?
        .write_to(&mut text)
        .map_err(|e| format!("render {}: {e}", format.file_name()))?;
    String::from_utf8(text).map_err(|e| format!("render {}: {e}", format.file_name()))
}

/// The launcher's words for one job, in a run (none in an emitted file).
fn launcher_words(opts: &Options<'_>, index: usize, job: &Job) -> Option<Vec<String>> {
    opts.run.as_ref().map(|run| {
        let mut words = run.launcher.clone();
        words.extend([
            index.to_string(),
            "--local".into(),
            job.command.len().to_string(),
        ]);
        for out in &job.outputs {
            words.extend(["--output".to_string(), out.clone()]);
        }
        words.push("--".into());
        words
    })
}

/// The first word of `words` that a command line in `file` cannot hold, as the reason.
fn line_problem(words: &[String], file: &str) -> Option<String> {
    words.iter().find_map(|w| escape::line_problem(w, file))
}

/// Checks what `check` says of every job's paths and command, and of the launcher, up front, so
/// that the file can then be written job by job without failing or being held in memory.
fn check_jobs(
    file: &JobFile,
    opts: &Options<'_>,
    name: &str,
    path_problem: impl Fn(&str) -> Option<String>,
) -> Result<(), String> {
    if let Some(run) = &opts.run {
        if let Some(p) = line_problem(&run.launcher, name) {
            return Err(p);
        }
    }
    for job in &file.jobs {
        let paths = job.outputs.iter().chain(&job.inputs);
        if let Some(p) = paths.filter_map(|p| path_problem(p)).next() {
            return Err(p);
        }
        if let Some(p) = line_problem(&job.command, name) {
            return Err(p);
        }
    }
    Ok(())
}

/// Escaping that `check_jobs` already proved possible.
fn checked(result: Result<String, String>) -> String {
    result.expect("checked before rendering")
}

#[derive(Template)]
#[template(path = "build.ninja", escape = "none")]
pub struct Ninja<'a> {
    version: &'static str,
    source: String,
    linker_output: String,
    builddir: Option<String>,
    dist_cc: String,
    jobs: Vec<NinjaJob<'a>>,
}

/// One job, escaped for build.ninja as the file is written.
struct NinjaJob<'a> {
    index: usize,
    job: &'a Job,
    opts: &'a Options<'a>,
}

impl NinjaJob<'_> {
    fn outputs(&self) -> String {
        let paths: Vec<String> = self
            .job
            .outputs
            .iter()
            .map(|p| checked(escape::ninja_path(p)))
            .collect();
        paths.join(" ")
    }

    fn inputs(&self) -> Vec<String> {
        self.job
            .inputs
            .iter()
            .map(|p| checked(escape::ninja_path(p)))
            .collect()
    }

    fn args(&self) -> String {
        checked(escape::ninja_value(&escape::shell_line(&self.job.command)))
    }

    fn launch(&self) -> Option<String> {
        launcher_words(self.opts, self.index, self.job)
            .map(|w| checked(escape::ninja_value(&(escape::shell_line(&w) + " "))))
    }
}

fn ninja<'a>(file: &'a JobFile, opts: &'a Options<'a>) -> Result<Ninja<'a>, String> {
    check_jobs(file, opts, "build.ninja", escape::ninja_path_problem)?;
    Ok(Ninja {
        version: env!("CARGO_PKG_VERSION"),
        source: escape::comment(opts.source),
        linker_output: escape::comment(&file.linker_output),
        builddir: match &opts.run {
            Some(run) => Some(escape::ninja_value(&run.state_dir)?),
            None => None,
        },
        dist_cc: escape::ninja_value(&escape::shell_line(opts.wrapper))?,
        jobs: opts
            .ordered(file)
            .into_iter()
            .map(|(index, job)| NinjaJob { index, job, opts })
            .collect(),
    })
}

#[derive(Template)]
#[template(path = "Makefile", escape = "none")]
pub struct Make<'a> {
    version: &'static str,
    source: String,
    linker_output: String,
    dist_cc: String,
    jobs: Vec<MakeJob<'a>>,
}

/// One job, escaped for a Makefile as the file is written.
struct MakeJob<'a> {
    index: usize,
    job: &'a Job,
    opts: &'a Options<'a>,
    /// Whether make can name all its paths; if not, it gets a phony target.
    named: bool,
}

impl MakeJob<'_> {
    /// The output files, or `dtlto-bridge-job-N` when make cannot name them all.
    fn target(&self) -> String {
        if !self.named {
            return format!("dtlto-bridge-job-{}", self.index);
        }
        let paths: Vec<String> = self
            .job
            .outputs
            .iter()
            .map(|p| escape::make_path(p).expect("checked"))
            .collect();
        paths.join(" ")
    }

    /// `:`, or ` &:` when one recipe makes several outputs.
    fn colon(&self) -> &'static str {
        if self.named && self.job.outputs.len() > 1 {
            " &:"
        } else {
            ":"
        }
    }

    fn prereqs(&self) -> Vec<String> {
        if !self.named {
            return Vec::new();
        }
        self.job
            .inputs
            .iter()
            .map(|p| escape::make_path(p).expect("checked"))
            .collect()
    }

    /// For a phony job: its exact inputs, shell-quoted, for the reader.
    fn quoted_inputs(&self) -> Option<String> {
        (!self.named).then(|| escape::comment(&escape::shell_line(&self.job.inputs)))
    }

    fn quoted_outputs(&self) -> String {
        escape::comment(&escape::shell_line(&self.job.outputs))
    }

    fn launch(&self) -> String {
        launcher_words(self.opts, self.index, self.job)
            .map(|w| checked(escape::make_recipe(&(escape::shell_line(&w) + " "))))
            .unwrap_or_default()
    }

    fn recipe(&self) -> String {
        checked(escape::make_recipe(&escape::shell_line_for_recipe(
            &self.job.command,
        )))
    }
}

impl Make<'_> {
    fn phony(&self) -> impl Iterator<Item = String> + '_ {
        self.jobs.iter().filter(|j| !j.named).map(MakeJob::target)
    }
}

fn make<'a>(file: &'a JobFile, opts: &'a Options<'a>) -> Result<Make<'a>, String> {
    check_jobs(file, opts, "a Makefile", |_| None)?;
    Ok(Make {
        version: env!("CARGO_PKG_VERSION"),
        source: escape::comment(opts.source),
        linker_output: escape::comment(&file.linker_output),
        dist_cc: escape::make_value(&escape::shell_line_for_recipe(opts.wrapper))?,
        jobs: opts
            .ordered(file)
            .into_iter()
            .map(|(index, job)| MakeJob {
                index,
                job,
                opts,
                named: job
                    .outputs
                    .iter()
                    .chain(&job.inputs)
                    .all(|p| escape::make_path_ok(p)),
            })
            .collect(),
    })
}
