//! Render: writes the jobs as a build.ninja or a Makefile through askama templates.
//!
//! It knows each file's layout and asks `escape` for every string it writes, streaming the
//! escaped text into the file; it does not know where the file goes, whether inputs exist, or
//! how the build tool is run.

use crate::escape;
use crate::parse::{Job, JobFile};
use askama::Template;
use std::fmt::{self, Display, Write};

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

impl Options<'_> {
    fn ordered<'f>(&self, file: &'f JobFile) -> Vec<(usize, &'f Job)> {
        match &self.order {
            Some(order) => order.iter().map(|&i| (i, &file.jobs[i])).collect(),
            None => file.jobs.iter().enumerate().collect(),
        }
    }
}

/// Text written by a closure, as the templates print it: escaping streams into the file.
struct Show<F>(F);

impl<F: Fn(&mut fmt::Formatter<'_>) -> fmt::Result> Display for Show<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (self.0)(f)
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

/// The launcher's words for job `index` in a run.
fn launcher_words(run: &RunHooks, index: usize) -> Vec<String> {
    let mut words = run.launcher.clone();
    words.push(index.to_string());
    words
}

/// Checks, up front, every job's paths with `path_problem` and every word of its command (and
/// the launcher's and wrapper's) for what no build file can hold, so that the file can then be
/// written job by job without failing or being held in memory.
fn check_jobs(
    file: &JobFile,
    opts: &Options<'_>,
    name: &str,
    path_problem: impl Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let words = |w: &[String]| w.iter().find_map(|w| escape::line_problem(w, name));
    if let Some(p) = opts.run.as_ref().and_then(|r| words(&r.launcher)) {
        return Err(p);
    }
    if let Some(p) = words(opts.wrapper) {
        return Err(p);
    }
    for job in &file.jobs {
        let paths = job.outputs.iter().chain(&job.inputs);
        if let Some(p) = paths.filter_map(|p| path_problem(p)).next() {
            return Err(p);
        }
        if let Some(p) = words(&job.command) {
            return Err(p);
        }
    }
    Ok(())
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
    jobs: Vec<NinjaJob<'a>>,
}

/// One job, escaped for build.ninja as the file is written.
struct NinjaJob<'a> {
    index: usize,
    job: &'a Job,
    opts: &'a Options<'a>,
}

impl NinjaJob<'_> {
    fn outputs(&self) -> impl Display + '_ {
        Show(move |f: &mut fmt::Formatter<'_>| {
            for (i, p) in self.job.outputs.iter().enumerate() {
                if i > 0 {
                    f.write_char(' ')?;
                }
                escape::write_ninja_path(f, p)?;
            }
            Ok(())
        })
    }

    fn inputs(&self) -> impl Iterator<Item = impl Display + '_> + '_ {
        self.job
            .inputs
            .iter()
            .map(|p| Show(move |f: &mut fmt::Formatter<'_>| escape::write_ninja_path(f, p)))
    }

    fn args(&self) -> impl Display + '_ {
        Show(move |f: &mut fmt::Formatter<'_>| {
            write!(escape::Dollars(f), "{}", escape::line(&self.job.command))
        })
    }

    fn launch(&self) -> impl Display + '_ {
        let words = self
            .opts
            .run
            .as_ref()
            .map(|r| launcher_words(r, self.index))
            .unwrap_or_default();
        Show(move |f: &mut fmt::Formatter<'_>| {
            write!(escape::Dollars(f), "{}", escape::line(&words))
        })
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
        run: opts.run.is_some(),
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
    run: bool,
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
    fn target(&self) -> impl Display + '_ {
        Show(move |f: &mut fmt::Formatter<'_>| {
            if !self.named {
                return write!(f, "dtlto-bridge-job-{}", self.index);
            }
            for (i, p) in self.job.outputs.iter().enumerate() {
                if i > 0 {
                    f.write_char(' ')?;
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

    fn prereqs(&self) -> impl Iterator<Item = impl Display + '_> + '_ {
        let inputs: &[String] = if self.named { &self.job.inputs } else { &[] };
        inputs
            .iter()
            .map(|p| Show(move |f: &mut fmt::Formatter<'_>| escape::write_make_path(f, p)))
    }

    /// For a phony job: its exact inputs, shell-quoted, for the reader.
    fn quoted_inputs(&self) -> Option<impl Display + '_> {
        (!self.named).then(|| escape::tail(&self.job.inputs))
    }

    fn quoted_outputs(&self) -> impl Display + '_ {
        escape::tail(&self.job.outputs)
    }

    /// The recipe: the launcher in a run, else the wrapper and the command.
    fn recipe(&self) -> impl Display + '_ {
        let launcher = self
            .opts
            .run
            .as_ref()
            .map(|r| launcher_words(r, self.index));
        Show(move |f: &mut fmt::Formatter<'_>| match &launcher {
            Some(words) => escape::write_recipe_line(&mut escape::Dollars(f), words),
            None => {
                f.write_str("$(DIST_CC) ")?;
                escape::write_recipe_line(&mut escape::Dollars(f), &self.job.command)
            }
        })
    }
}

impl Make<'_> {
    fn phony(&self) -> impl Iterator<Item = impl Display + '_> + '_ {
        self.jobs.iter().filter(|j| !j.named).map(MakeJob::target)
    }
}

fn make<'a>(file: &'a JobFile, opts: &'a Options<'a>) -> Result<Make<'a>, String> {
    check_jobs(file, opts, "a Makefile", |_| None)?;
    Ok(Make {
        version: env!("CARGO_PKG_VERSION"),
        source: escape::comment(opts.source),
        linker_output: escape::comment(&file.linker_output),
        run: opts.run.is_some(),
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
