//! Linkfile: the whole classic flow of `dtlto-bridge link --emit` as one build.ninja or Makefile:
//! the thin link, the backend jobs (rendered as `emit` renders a job file), the final link.
//!
//! It knows how the three steps depend on each other in each format and asks `escape` for
//! every string; it does not know lld's options or where the files came from.

use crate::job::parse::JobFile;
use crate::render::escape;
use crate::render::{self, Format};
use std::fmt::Write;

/// The two links around the jobs, as files and commands relative to the directory the build
/// file runs from.
pub struct Steps<'a> {
    /// This build file, as `make -f` names it (for the Makefile's sequential steps).
    pub build_file: &'a str,
    /// lld's program; each link runs `LD @RESPONSE_FILE`.
    pub ld: &'a str,
    pub thin_rsp: &'a str,
    pub thin_inputs: &'a [String],
    /// Every index shard and imports list, and lld's list of modules.
    pub thin_outputs: &'a [String],
    /// The thin link's time stamp (make only).
    pub stamp: &'a str,
    pub final_rsp: &'a str,
    /// The native objects and the other files of the final link.
    pub final_inputs: &'a [String],
    pub output: &'a str,
    /// The `dtlto-bridge link --emit` command that wrote this file, run again when one of
    /// `archives` changes (their members were extracted, and may be others now).
    pub regenerate: &'a [String],
    pub archives: &'a [String],
    /// Other names of this build file (absolute ones), which `-f` may give.
    pub aliases: &'a [String],
    /// An archive is dated in the future: its own rule runs on every run (it writes the file
    /// only if an archive changed).
    pub check_always: bool,
}

/// The build file: the jobs as `emit` writes them, then the links around them.
pub fn render(
    format: Format,
    file: &JobFile<'_>,
    wrapper: &[String],
    source: &str,
    steps: &Steps<'_>,
) -> Result<String, String> {
    let opts = render::Options {
        wrapper,
        source,
        run: None,
        order: None,
    };
    let mut out = render::render(format, file, &opts)?;
    match format {
        Format::Ninja => ninja(&mut out, steps)?,
        Format::Make => make(&mut out, steps)?,
    }
    Ok(out)
}

fn ninja_paths(paths: &[String]) -> Result<String, String> {
    let mut s = String::new();
    for p in paths {
        s.push_str(" $\n    ");
        s.push_str(&escape::ninja_path(p)?);
    }
    Ok(s)
}

fn ninja(out: &mut String, s: &Steps<'_>) -> Result<(), String> {
    let thin = escape::ninja_value(&escape::shell_line([s.ld, &format!("@{}", s.thin_rsp)]))?;
    let last = escape::ninja_value(&escape::shell_line([s.ld, &format!("@{}", s.final_rsp)]))?;
    let output = escape::ninja_path(s.output)?;
    let _ = write!(
        out,
        "{}\n# The thin link (lld --thinlto-index-only): each module's index shard and imports list.\n\
         rule dtlto_bridge_thin_link\n  command = {thin}\n  description = ThinLTO thin link\n\
         build{}: dtlto_bridge_thin_link{}\n\
         \n# The final link: the native objects in place of the bitcode.\n\
         rule dtlto_bridge_final_link\n  command = {last}\n  description = link $out\n\
         build {output}: dtlto_bridge_final_link{}\n\
         default {output}\n",
        ninja_regenerate(s)?,
        ninja_paths(s.thin_outputs)?,
        ninja_paths(s.thin_inputs)?,
        ninja_paths(s.final_inputs)?,
    );
    Ok(())
}

/// ninja writes the file again, and reloads it, when an archive changed.
fn ninja_regenerate(s: &Steps<'_>) -> Result<String, String> {
    if s.archives.is_empty() {
        return Ok(String::new());
    }
    let mut names = escape::ninja_path(s.build_file)?;
    for alias in s.aliases {
        names.push(' ');
        names.push_str(&escape::ninja_path(alias)?);
    }
    let (always, skew) = if s.check_always {
        (
            " | dtlto-bridge-clock-skew",
            "# An archive is dated in the future: checked on every run until then.\n\
             build dtlto-bridge-clock-skew: phony\n",
        )
    } else {
        ("", "")
    };
    Ok(format!(
        "\n# This file, written again (and reloaded by ninja) when an archive changes: its \
         members\n# are extracted in its directory, and may be others now. The command \
         leaves it as it\n# is if no archive changed.\n\
         rule dtlto_bridge_regenerate\n  command = {}\n  description = dtlto-bridge link --emit \
         (an archive changed?)\n  generator = 1\n  restat = 1\n\
         {skew}build {names}: dtlto_bridge_regenerate{}{always}\n",
        escape::ninja_value(&escape::shell_line(s.regenerate.iter().map(String::as_str)))?,
        ninja_paths(s.archives)?,
    ))
}

/// Prerequisites make can name, and a comment naming those it cannot (the rule then always
/// runs).
fn make_paths(paths: &[String]) -> (String, String) {
    let mut s = String::new();
    let mut unnamed = Vec::new();
    for p in paths {
        match escape::make_path(p) {
            Some(named) => {
                s.push_str(" \\\n    ");
                s.push_str(&named);
            }
            None => unnamed.push(escape::shell_word(p)),
        }
    }
    if unnamed.is_empty() {
        return (s, String::new());
    }
    s.push_str(" \\\n    dtlto-bridge-force");
    let note = format!(
        "# Always runs: make cannot name these inputs: {}\n",
        escape::comment(&unnamed.join(" "))
    );
    (s, note)
}

fn make(out: &mut String, s: &Steps<'_>) -> Result<(), String> {
    let recipe =
        |rsp: &str| escape::make_recipe(&escape::shell_line_for_recipe([s.ld, &format!("@{rsp}")]));
    let thin = recipe(s.thin_rsp)?;
    let last = recipe(s.final_rsp)?;
    let stamp =
        escape::make_path(s.stamp).ok_or_else(|| format!("{}: make cannot name it", s.stamp))?;
    let touch = escape::make_recipe(&escape::shell_line_for_recipe(["touch", s.stamp]))?;
    let this = escape::make_recipe(&escape::shell_word(s.build_file))?;
    let (thin_inputs, thin_note) = make_paths(s.thin_inputs);
    let (final_inputs, final_note) = make_paths(s.final_inputs);
    let regenerate = if s.archives.is_empty() {
        String::new()
    } else {
        let mut this = escape::make_path(s.build_file)
            .ok_or_else(|| format!("{}: make cannot name it", s.build_file))?;
        for alias in s.aliases.iter().filter_map(|a| escape::make_path(a)) {
            this.push(' ');
            this.push_str(&alias);
        }
        // make starts over only when the command changed the file's date, which it does only
        // when an archive changed; an archive dated in the future runs it on every run.
        let (named, unnamed): (Vec<&String>, Vec<&String>) = s
            .archives
            .iter()
            .partition(|a| escape::make_path(a).is_some());
        let archives: String = named
            .iter()
            .map(|a| format!(" \\\n    {}", escape::make_path(a).unwrap_or_default()))
            .collect();
        let note = if unnamed.is_empty() {
            String::new()
        } else {
            let words: Vec<String> = unnamed.iter().map(|a| escape::shell_word(a)).collect();
            format!(
                "# Not watched: make cannot name these archives: {}\n",
                escape::comment(&words.join(" "))
            )
        };
        let command = escape::make_recipe(&escape::shell_line_for_recipe(
            s.regenerate.iter().map(String::as_str),
        ))?;
        format!(
            "\n# This file, written again (make then starts over) when an archive changes: its \
             members\n# are extracted in its directory, and may be others now. The command \
             leaves it as it\n# is if no archive changed.\n\
             {note}{this}:{archives}\n\t{command}\n"
        )
    };
    let _ = write!(
        out,
        "\n# The whole link in three steps, one after the other: the thin link, the backend jobs,\n\
         # the final link.\n\
         .PHONY: dtlto-bridge-link dtlto-bridge-thin dtlto-bridge-final dtlto-bridge-force\n\
         .DEFAULT_GOAL := dtlto-bridge-link\n\
         dtlto-bridge-link:\n\
         \t+$(MAKE) -f {this} dtlto-bridge-thin\n\
         \t+$(MAKE) -f {this} dtlto-bridge-all\n\
         \t+$(MAKE) -f {this} dtlto-bridge-final\n\
         dtlto-bridge-force:\n\
         {regenerate}\
         \n# The thin link (lld --thinlto-index-only): each module's index shard and imports list.\n\
         {thin_note}dtlto-bridge-thin: {stamp}\n\
         {stamp}:{thin_inputs}\n\
         \t{thin}\n\
         \t{touch}\n\
         \n# The final link: the native objects in place of the bitcode.\n{final_note}",
    );
    match escape::make_path(s.output) {
        Some(output) => {
            let _ = write!(
                out,
                "dtlto-bridge-final: {output}\n{output}:{final_inputs}\n\t{last}\n"
            );
        }
        None => {
            let _ = write!(out, "dtlto-bridge-final:{final_inputs}\n\t{last}\n");
        }
    }
    Ok(())
}
