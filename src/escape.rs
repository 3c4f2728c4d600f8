//! Escape: every rule for writing a string into a shell command, a build.ninja or a Makefile.
//!
//! It knows the quoting rules of POSIX sh, ninja and GNU make, and which strings each cannot
//! express; it does not know what the strings mean or which backend was chosen.

use std::borrow::Cow;

/// Quotes one word for POSIX sh, leaving plain words as they are.
pub fn shell_word(word: &str) -> Cow<'_, str> {
    shell_words::quote(word)
}

/// Quotes each word for POSIX sh and joins them with spaces.
pub fn shell_line<S: AsRef<str>>(words: &[S]) -> String {
    let quoted: Vec<Cow<'_, str>> = words.iter().map(|w| shell_word(w.as_ref())).collect();
    quoted.join(" ")
}

/// Quotes words for POSIX sh so that the line can also start a Makefile recipe: make takes a
/// leading `@`, `-` or `+` (even one that comes from a variable) as a recipe prefix, so a first
/// word starting with one is always quoted.
pub fn shell_line_for_recipe<S: AsRef<str>>(words: &[S]) -> String {
    let mut line = shell_line(words);
    if let Some(first) = words.first().map(AsRef::as_ref) {
        if first.starts_with(['@', '-', '+']) && !line.starts_with('\'') {
            line = format!("'{}'{}", first, &line[first.len()..]);
        }
    }
    line
}

/// Why a string cannot be written in a build file.
fn refuse(s: &str, file: &str, c: char) -> String {
    format!(
        "{s:?} cannot be written in {file}: it has no escape for {}",
        describe(c)
    )
}

fn describe(c: char) -> String {
    match c {
        '\n' => "a newline".to_string(),
        '\r' => "a carriage return".to_string(),
        '\0' => "a NUL byte".to_string(),
        c => format!("'{c}'"),
    }
}

/// The first of the ASCII characters `bad` in `s`: a byte scan, as every path passes here.
fn first_of(s: &str, bad: &[char]) -> Option<char> {
    s.bytes()
        .find(|b| b.is_ascii() && bad.contains(&char::from(*b)))
        .map(char::from)
}

/// Why a path cannot stand on a `build` line of build.ninja, if it cannot.
pub fn ninja_path_problem(path: &str) -> Option<String> {
    first_of(path, &['\n', '\r', '\0', '|']).map(|c| refuse(path, "build.ninja", c))
}

/// Why a word cannot be part of a command line in `file` (build.ninja or a Makefile), if it
/// cannot: neither has an escape for a line break or a NUL.
pub fn line_problem(word: &str, file: &str) -> Option<String> {
    first_of(word, &['\n', '\r', '\0']).map(|c| refuse(word, file, c))
}

/// A path on a `build` line of build.ninja: `$`, space and `:` take a `$`.
pub fn ninja_path(path: &str) -> Result<String, String> {
    if let Some(problem) = ninja_path_problem(path) {
        return Err(problem);
    }
    if !path.contains(['$', ' ', ':']) {
        return Ok(path.to_string());
    }
    let mut out = String::with_capacity(path.len() + 4);
    for c in path.chars() {
        if matches!(c, '$' | ' ' | ':') {
            out.push('$');
        }
        out.push(c);
    }
    Ok(out)
}

/// A variable value in build.ninja (`name = value`): `$` doubles, leading spaces take a `$`.
pub fn ninja_value(value: &str) -> Result<String, String> {
    if let Some(problem) = line_problem(value, "build.ninja") {
        return Err(problem);
    }
    if !value.starts_with(' ') && !value.contains('$') {
        return Ok(value.to_string());
    }
    let mut out = String::with_capacity(value.len() + 4);
    let mut leading = true;
    for c in value.chars() {
        leading &= c == ' ';
        if c == '$' || leading {
            out.push('$');
        }
        out.push(c);
    }
    Ok(out)
}

/// A path as a GNU make target or prerequisite, if make can express it.
///
/// Make reads `(` as an archive member, `%` as a pattern, `=` and `;` as syntax and `*?[~` as
/// wildcards, with no escape for them that works in prerequisites; such paths get `None`, and
/// the renderer falls back to a phony job target with the path quoted in the recipe only.
pub fn make_path(path: &str) -> Option<String> {
    if !make_path_ok(path) {
        return None;
    }
    let mut out = String::with_capacity(path.len() + 4);
    for c in path.chars() {
        match c {
            ' ' | ':' | '#' => {
                out.push('\\');
                out.push(c);
            }
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    Some(out)
}

/// Whether make can name `path` as a target or prerequisite (see `make_path`): plain characters,
/// the three that take a backslash (space, `:`, `#`), `$` (doubled), and non-ASCII text.
pub fn make_path_ok(path: &str) -> bool {
    path.chars().all(|c| {
        matches!(c, 'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '+' | '-' | '/' | ',' | '@'
            | ' ' | ':' | '#' | '$')
            || (!c.is_ascii() && !c.is_control() && !c.is_whitespace())
    })
}

/// Shell text on a Makefile recipe line: `$` doubles; make passes the rest to the shell as is.
pub fn make_recipe(text: &str) -> Result<String, String> {
    if let Some(problem) = line_problem(text, "a Makefile") {
        return Err(problem);
    }
    Ok(text.replace('$', "$$"))
}

/// The Makefile variable that holds a literal `#`: make reads `#` in an assignment as the start
/// of a comment, and its backslash escape interacts with backslashes before it.
pub const MAKE_HASH_VAR: &str = "DTLTO_BRIDGE_HASH";

/// A variable value in a Makefile (`NAME = value`): `$` doubles and `#` becomes a reference to
/// the variable that holds it.
pub fn make_value(value: &str) -> Result<String, String> {
    if let Some(c) = first_of(value, &['\n', '\r', '\0']) {
        return Err(refuse(value, "a Makefile", c));
    }
    if value.ends_with('\\') {
        return Err(refuse(value, "a Makefile variable", '\\'));
    }
    Ok(value
        .replace('$', "$$")
        .replace('#', &format!("$({MAKE_HASH_VAR})")))
}

/// A Makefile comment line may hold anything but a line break.
pub fn comment(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Paths lld really writes, and paths users really have.
    const NASTY: &[&str] = &[
        "libfoo.a(bar.o at 1234).7.1A2B.o",
        "dir with space/a.o",
        "ünï/cödé.o",
        "cost$1.o",
        "c:colon.o",
        "hash#.o",
        "100%.o",
        "a=b.o",
        "it's.o",
        "say\"hi\".o",
    ];

    #[test]
    fn shell_words_round_trip() {
        for p in NASTY
            .iter()
            .chain(&["", "-", "plain.o", "a\nb", "*?[]~", "$(x)`y`"])
        {
            let line = shell_line(&[*p, "x"]);
            assert_eq!(shell_words::split(&line).unwrap(), [*p, "x"], "{line}");
        }
    }

    #[test]
    fn recipe_lines_never_start_with_a_make_prefix() {
        let table: &[(&[&str], &str)] = &[
            (&["@", "cc"], "'@' cc"),
            (&["-x", "a b"], "'-x' 'a b'"),
            (&["+cc"], "'+cc'"),
            (&["@a'b"], "'@a'\\''b'"),
            (&["cc", "-c"], "cc -c"),
            (&[], ""),
        ];
        for (words, want) in table {
            let got = shell_line_for_recipe(words);
            assert_eq!(&got, want);
            assert_eq!(shell_words::split(&got).unwrap(), *words);
        }
    }

    #[test]
    fn shell_leaves_plain_words_alone() {
        assert_eq!(
            shell_line(&["clang", "-O2", "-fthinlto-index=a.bc"]),
            "clang -O2 '-fthinlto-index=a.bc'",
            "'=' is quoted: a first word with '=' would be a variable assignment"
        );
        assert_eq!(shell_word("a b"), "'a b'");
    }

    /// Each input escapes to `Ok(text)`, or is refused with a message containing `Err(text)`.
    fn check(f: fn(&str) -> Result<String, String>, table: &[(&str, Result<&str, &str>)]) {
        for (input, want) in table {
            match (f(input), want) {
                (Ok(got), Ok(want)) => assert_eq!(&got, want),
                (Err(got), Err(want)) => assert!(got.contains(want), "{got}"),
                (got, want) => panic!("{input:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn ninja_paths() {
        let table: &[(&str, Result<&str, &str>)] = &[
            ("a.o", Ok("a.o")),
            (
                "libfoo.a(bar.o at 1234).7.1A2B.o",
                Ok("libfoo.a(bar.o$ at$ 1234).7.1A2B.o"),
            ),
            ("c:colon.o", Ok("c$:colon.o")),
            ("cost$1.o", Ok("cost$$1.o")),
            ("hash#.o", Ok("hash#.o")),
            ("ünï.o", Ok("ünï.o")),
            ("a|b", Err("'|'")),
            ("a\nb", Err("a newline")),
            ("a\rb", Err("a carriage return")),
        ];
        check(ninja_path, table);
    }

    #[test]
    fn ninja_values() {
        let table: &[(&str, Result<&str, &str>)] = &[
            ("distcc", Ok("distcc")),
            ("", Ok("")),
            ("  x y", Ok("$ $ x y")),
            ("a$b", Ok("a$$b")),
            ("'a:b c'", Ok("'a:b c'")),
            ("a\nb", Err("a newline")),
        ];
        check(ninja_value, table);
    }

    #[test]
    fn make_paths() {
        let table: &[(&str, Option<&str>)] = &[
            ("a.o", Some("a.o")),
            ("dir with space/a.o", Some("dir\\ with\\ space/a.o")),
            ("c:colon.o", Some("c\\:colon.o")),
            ("hash#.o", Some("hash\\#.o")),
            ("cost$1.o", Some("cost$$1.o")),
            ("ünï/cödé.o", Some("ünï/cödé.o")),
            ("libfoo.a(bar.o at 1234).7.1A2B.o", None),
            ("100%.o", None),
            ("a=b.o", None),
            ("a;b.o", None),
            ("w*.o", None),
            ("~home.o", None),
            ("it's.o", None),
            ("tab\t.o", None),
            ("back\\slash.o", None),
        ];
        for (input, want) in table {
            assert_eq!(make_path(input).as_deref(), *want, "{input:?}");
        }
    }

    #[test]
    fn make_recipes_and_values() {
        assert_eq!(
            make_recipe("clang 'a$b' '#x'").unwrap(),
            "clang 'a$$b' '#x'"
        );
        assert!(make_recipe("a\nb").unwrap_err().contains("a newline"));
        assert_eq!(make_value("distcc").unwrap(), "distcc");
        assert_eq!(
            make_value("'x#y' $z").unwrap(),
            "'x$(DTLTO_BRIDGE_HASH)y' $$z"
        );
        assert_eq!(make_value("'\\#'").unwrap(), "'\\$(DTLTO_BRIDGE_HASH)'");
        assert!(make_value("x\\").is_err());
        assert!(make_value("a\rb").is_err());
    }

    #[test]
    fn comments_stay_on_one_line() {
        assert_eq!(comment("a\nb\rc"), "a b c");
    }
}
