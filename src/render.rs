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
}

/// Renders the jobs in `format`, or says which string that format cannot express.
pub fn render(format: Format, file: &JobFile, opts: &Options<'_>) -> Result<String, String> {
    let text = match format {
        Format::Ninja => ninja(file, opts)?.render(),
        Format::Make => make(file, opts)?.render(),
    };
    text.map_err(|e| format!("render {}: {e}", format.file_name()))
}

fn launcher(opts: &Options<'_>, index: usize, job: &Job) -> Option<String> {
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
        escape::shell_line(&words) + " "
    })
}

#[derive(Template)]
#[template(path = "build.ninja", escape = "none")]
struct Ninja {
    version: &'static str,
    source: String,
    linker_output: String,
    builddir: Option<String>,
    dist_cc: String,
    jobs: Vec<NinjaJob>,
}

struct NinjaJob {
    index: usize,
    outputs: String,
    inputs: Vec<String>,
    args: String,
    launch: Option<String>,
}

fn ninja(file: &JobFile, opts: &Options<'_>) -> Result<Ninja, String> {
    let jobs = file
        .jobs
        .iter()
        .enumerate()
        .map(|(index, job)| ninja_job(index, job, opts))
        .collect::<Result<_, String>>()?;
    Ok(Ninja {
        version: env!("CARGO_PKG_VERSION"),
        source: escape::comment(opts.source),
        linker_output: escape::comment(&file.linker_output),
        builddir: match &opts.run {
            Some(run) => Some(escape::ninja_value(&run.state_dir)?),
            None => None,
        },
        dist_cc: escape::ninja_value(&escape::shell_line(opts.wrapper))?,
        jobs,
    })
}

fn ninja_job(index: usize, job: &Job, opts: &Options<'_>) -> Result<NinjaJob, String> {
    let paths = |list: &[String]| -> Result<Vec<String>, String> {
        list.iter().map(|p| escape::ninja_path(p)).collect()
    };
    Ok(NinjaJob {
        index,
        outputs: paths(&job.outputs)?.join(" "),
        inputs: paths(&job.inputs)?,
        args: escape::ninja_value(&escape::shell_line(&job.command))?,
        launch: launcher(opts, index, job)
            .map(|l| escape::ninja_value(&l))
            .transpose()?,
    })
}

#[derive(Template)]
#[template(path = "Makefile", escape = "none")]
struct Make {
    version: &'static str,
    source: String,
    linker_output: String,
    dist_cc: String,
    phony: Vec<String>,
    goals: Vec<String>,
    jobs: Vec<MakeJob>,
}

struct MakeJob {
    index: usize,
    /// The output files, or `dtlto-bridge-job-N` when make cannot name them all.
    target: String,
    /// `:`, or `&:` when one recipe makes several outputs.
    colon: &'static str,
    prereqs: Vec<String>,
    /// For a phony job: its exact inputs and outputs, shell-quoted, for the reader.
    quoted_inputs: Option<String>,
    quoted_outputs: String,
    launch: String,
    recipe: String,
}

fn make(file: &JobFile, opts: &Options<'_>) -> Result<Make, String> {
    let mut jobs = Vec::with_capacity(file.jobs.len());
    let mut phony = Vec::new();
    for (index, job) in file.jobs.iter().enumerate() {
        let job = make_job(index, job, opts)?;
        if job.quoted_inputs.is_some() {
            phony.push(job.target.clone());
        }
        jobs.push(job);
    }
    Ok(Make {
        version: env!("CARGO_PKG_VERSION"),
        source: escape::comment(opts.source),
        linker_output: escape::comment(&file.linker_output),
        dist_cc: escape::make_value(&escape::shell_line_for_recipe(opts.wrapper))?,
        goals: jobs.iter().map(|j| j.target.clone()).collect(),
        phony,
        jobs,
    })
}

fn make_job(index: usize, job: &Job, opts: &Options<'_>) -> Result<MakeJob, String> {
    let outputs: Option<Vec<String>> = job.outputs.iter().map(|p| escape::make_path(p)).collect();
    let inputs: Option<Vec<String>> = job.inputs.iter().map(|p| escape::make_path(p)).collect();
    let launch = match launcher(opts, index, job) {
        Some(l) => escape::make_recipe(&l)?,
        None => String::new(),
    };
    let recipe = escape::make_recipe(&escape::shell_line_for_recipe(&job.command))?;
    let quoted_outputs = escape::comment(&escape::shell_line(&job.outputs));
    Ok(match (outputs, inputs) {
        (Some(outputs), Some(prereqs)) => MakeJob {
            index,
            colon: if outputs.len() > 1 { " &:" } else { ":" },
            target: outputs.join(" "),
            prereqs,
            quoted_inputs: None,
            quoted_outputs,
            launch,
            recipe,
        },
        _ => MakeJob {
            index,
            target: format!("dtlto-bridge-job-{index}"),
            colon: ":",
            prereqs: Vec::new(),
            quoted_inputs: Some(escape::comment(&escape::shell_line(&job.inputs))),
            quoted_outputs,
            launch,
            recipe,
        },
    })
}
