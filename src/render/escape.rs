//! Escape: every rule for writing a string into a shell command, a build.ninja or a Makefile.
//!
//! It knows the quoting rules of POSIX sh (and of bash, which is /bin/sh on Fedora, RHEL and
//! Arch), ninja and GNU make, and which strings each cannot express (response files are
//! `link::rsp`'s); it does not know what the strings mean or which backend was chosen. Quoting streams into any `fmt::Write`, so the
//! renderers write escaped text without building copies of it.

use std::fmt::{self, Display, Write};

/// Whether `word` can stand unquoted in a shell command: only `[A-Za-z0-9_@%+=:,./-]`. Anything
/// else is quoted, including what only bash expands (`{a,b}`, `!`, `^`). `=` is unsafe in the
/// first word of a line, where the shell would read `a=b` as an assignment.
fn shell_safe(word: &str, first: bool) -> bool {
    !word.is_empty()
        && word
            .bytes()
            .all(|b| SAFE[usize::from(b)] || (b == b'=' && !first))
}

/// The bytes a word may hold unquoted (`=` is decided apart, by position).
const SAFE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'_' | b'@' | b'%' | b'+' | b':' | b',' | b'.' | b'/' | b'-'
            );
        b += 1;
    }
    table
};

/// Writes one word for the shell: as it is when safe, else in single quotes (`'` as `'\''`).
pub fn write_shell_word<W: Write + ?Sized>(out: &mut W, word: &str, first: bool) -> fmt::Result {
    if shell_safe(word, first) {
        return out.write_str(word);
    }
    out.write_char('\'')?;
    let mut parts = word.split('\'');
    if let Some(p) = parts.next() {
        out.write_str(p)?;
    }
    for p in parts {
        out.write_str("'\\''")?;
        out.write_str(p)?;
    }
    out.write_char('\'')
}

/// Words quoted for the shell and joined by spaces, as a `Display` that writes without copying.
pub struct ShellLine<I> {
    words: I,
    /// Whether the first word starts the command line (then `=` in it is quoted too).
    starts_line: bool,
}

impl<I> Display for ShellLine<I>
where
    I: Iterator + Clone,
    I::Item: AsRef<str>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_words(f, self.words.clone(), self.starts_line)
    }
}

/// Writes words quoted for the shell, joined by spaces; `starts_line` as for `line`.
pub fn write_words<W, I>(out: &mut W, words: I, starts_line: bool) -> fmt::Result
where
    W: Write + ?Sized,
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    for (i, w) in words.into_iter().enumerate() {
        if i > 0 {
            out.write_char(' ')?;
        }
        write_shell_word(out, w.as_ref(), i == 0 && starts_line)?;
    }
    Ok(())
}

/// Quotes each word for the shell and joins them with spaces; the first word may start a line.
pub fn shell_line<W>(words: W) -> String
where
    W: IntoIterator,
    W::IntoIter: Clone,
    W::Item: AsRef<str>,
{
    line(words).to_string()
}

/// `shell_line` without the copy.
pub fn line<W>(words: W) -> ShellLine<W::IntoIter>
where
    W: IntoIterator,
    W::IntoIter: Clone,
    W::Item: AsRef<str>,
{
    ShellLine {
        words: words.into_iter(),
        starts_line: true,
    }
}

/// Words that continue a command line (none of them starts it).
pub fn tail<W>(words: W) -> ShellLine<W::IntoIter>
where
    W: IntoIterator,
    W::IntoIter: Clone,
    W::Item: AsRef<str>,
{
    ShellLine {
        words: words.into_iter(),
        starts_line: false,
    }
}

/// Quotes one word for the shell, not at the start of a line.
pub fn shell_word(word: &str) -> String {
    let mut s = String::with_capacity(word.len() + 2);
    let _ = write_shell_word(&mut s, word, false);
    s
}

/// Writes a shell line that may also start a Makefile recipe: make takes a leading `@`, `-` or
/// `+` (even one that comes from a variable) as a recipe prefix, so such a first word is quoted.
pub fn write_recipe_line<W>(out: &mut impl Write, words: W) -> fmt::Result
where
    W: IntoIterator,
    W::Item: AsRef<str>,
{
    let mut words = words.into_iter();
    let Some(first) = words.next() else {
        return Ok(());
    };
    let first = first.as_ref();
    if first.starts_with(['@', '-', '+']) && shell_safe(first, true) {
        write!(out, "'{first}'")?;
    } else {
        write_shell_word(out, first, true)?;
    }
    for w in words {
        out.write_char(' ')?;
        write_shell_word(out, w.as_ref(), false)?;
    }
    Ok(())
}

/// `write_recipe_line` into a new string.
pub fn shell_line_for_recipe<W>(words: W) -> String
where
    W: IntoIterator,
    W::Item: AsRef<str>,
{
    let mut s = String::new();
    let _ = write_recipe_line(&mut s, words);
    s
}

/// Passes text on with every `$` doubled: what ninja variable values and make recipes need.
pub struct Dollars<'a, W: Write>(pub &'a mut W);

impl<W: Write> Write for Dollars<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut rest = s;
        while let Some(i) = memchr::memchr(b'$', rest.as_bytes()) {
            self.0.write_str(&rest[..=i])?;
            self.0.write_char('$')?;
            rest = &rest[i + 1..];
        }
        self.0.write_str(rest)
    }
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

/// The first of the ASCII characters `bad` in `s`: one pass over its bytes.
fn first_of(s: &str, bad: &[u8]) -> Option<char> {
    let mut table = [false; 256];
    for &b in bad {
        table[usize::from(b)] = true;
    }
    s.bytes().find(|&b| table[usize::from(b)]).map(char::from)
}

/// Why a word cannot be part of a command line in any build file, if it cannot: neither
/// build.ninja nor a Makefile has an escape for a line break or a NUL.
pub fn line_problem(word: &str, file: &str) -> Option<String> {
    first_of(word, b"\n\r\0").map(|c| refuse(word, file, c))
}

/// Why a path cannot stand on a `build` line of build.ninja, if it cannot.
pub fn ninja_path_problem(path: &str) -> Option<String> {
    const BAD: [bool; 256] = {
        let mut t = [false; 256];
        t[b'\n' as usize] = true;
        t[b'\r' as usize] = true;
        t[0] = true;
        t[b'|' as usize] = true;
        t
    };
    let c = path.bytes().find(|&b| BAD[usize::from(b)])?;
    Some(refuse(path, "build.ninja", char::from(c)))
}

/// Writes a path for a `build` line of build.ninja (checked by `ninja_path_problem`): `$`,
/// space and `:` take a `$`.
pub fn write_ninja_path(out: &mut impl Write, path: &str) -> fmt::Result {
    let mut rest = path;
    while let Some(i) = rest.bytes().position(|b| NINJA_ESCAPED[usize::from(b)]) {
        out.write_str(&rest[..i])?;
        out.write_char('$')?;
        out.write_str(&rest[i..=i])?;
        rest = &rest[i + 1..];
    }
    out.write_str(rest)
}

/// The bytes that take a `$` in a path of build.ninja.
const NINJA_ESCAPED: [bool; 256] = {
    let mut table = [false; 256];
    table[b'$' as usize] = true;
    table[b' ' as usize] = true;
    table[b':' as usize] = true;
    table
};

/// A path on a `build` line of build.ninja, or why it cannot be one.
pub fn ninja_path(path: &str) -> Result<String, String> {
    if let Some(problem) = ninja_path_problem(path) {
        return Err(problem);
    }
    let mut s = String::with_capacity(path.len() + 4);
    let _ = write_ninja_path(&mut s, path);
    Ok(s)
}

/// A variable value in build.ninja (`name = value`): `$` doubles, leading spaces take a `$`.
pub fn ninja_value(value: &str) -> Result<String, String> {
    if let Some(problem) = line_problem(value, "build.ninja") {
        return Err(problem);
    }
    let body = value.trim_start_matches(' ');
    let mut out = "$ ".repeat(value.len() - body.len());
    let _ = Dollars(&mut out).write_str(body);
    Ok(out)
}

/// Whether make can name `path` as a target or prerequisite: plain characters, the three that
/// take a backslash (space, `:`, `#`), `$` (doubled), and non-ASCII text.
///
/// Make reads `(` as an archive member, `%` as a pattern, `=` and `;` as syntax and `*?[~` as
/// wildcards, with no escape for them that works in prerequisites; the renderer gives a job with
/// such a path a phony target and quotes the path in the recipe only.
pub fn make_path_ok(path: &str) -> bool {
    let plain = |c: char| {
        matches!(c, 'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '+' | '-' | '/' | ',' | '@'
            | ' ' | ':' | '#' | '$')
    };
    if path.is_ascii() {
        return path.bytes().all(|b| MAKE_OK[usize::from(b)]);
    }
    path.chars()
        .all(|c| plain(c) || (!c.is_ascii() && !c.is_control() && !c.is_whitespace()))
}

/// The ASCII bytes make can name (see `make_path_ok`).
const MAKE_OK: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'.' | b'_' | b'+' | b'-' | b'/' | b',' | b'@' | b' ' | b':' | b'#' | b'$'
            );
        b += 1;
    }
    table
};

/// Writes a path make can name (see `make_path_ok`) as a target or prerequisite: space, `:` and
/// `#` take a backslash, `$` doubles.
pub fn write_make_path(out: &mut impl Write, path: &str) -> fmt::Result {
    let mut rest = path;
    while let Some(i) = rest
        .bytes()
        .position(|b| matches!(b, b' ' | b':' | b'#' | b'$'))
    {
        out.write_str(&rest[..i])?;
        out.write_str(match rest.as_bytes()[i] {
            b' ' => "\\ ",
            b':' => "\\:",
            b'#' => "\\#",
            _ => "$$",
        })?;
        rest = &rest[i + 1..];
    }
    out.write_str(rest)
}

/// A path as a GNU make target or prerequisite, if make can express it.
pub fn make_path(path: &str) -> Option<String> {
    make_path_ok(path).then(|| {
        let mut s = String::with_capacity(path.len() + 4);
        let _ = write_make_path(&mut s, path);
        s
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
    if let Some(c) = first_of(value, b"\n\r\0") {
        return Err(refuse(value, "a Makefile", c));
    }
    if value.ends_with('\\') {
        return Err(refuse(value, "a Makefile variable", '\\'));
    }
    Ok(value
        .replace('$', "$$")
        .replace('#', &format!("$({MAKE_HASH_VAR})")))
}

/// A comment line may hold anything but a line break.
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
        "x{a,b}.o",
        "bang!.o",
        "caret^.o",
        "~home.o",
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

    /// Each word is written as shown, as the first word of a line and after it.
    #[test]
    fn shell_quotes_all_but_the_safe_set() {
        let table: &[(&str, &str, &str)] = &[
            ("clang", "clang", "clang"),
            (
                "-fthinlto-index=a.bc",
                "'-fthinlto-index=a.bc'",
                "-fthinlto-index=a.bc",
            ),
            (
                "a@b%c+d:e,f.g/h-i_j",
                "a@b%c+d:e,f.g/h-i_j",
                "a@b%c+d:e,f.g/h-i_j",
            ),
            ("x{a,b}.o", "'x{a,b}.o'", "'x{a,b}.o'"),
            ("bang!", "'bang!'", "'bang!'"),
            ("a^b", "'a^b'", "'a^b'"),
            ("~x", "'~x'", "'~x'"),
            ("#x", "'#x'", "'#x'"),
            ("it's", "'it'\\''s'", "'it'\\''s'"),
            ("", "''", "''"),
            ("ü", "'ü'", "'ü'"),
        ];
        for (word, first, later) in table {
            let mut s = String::new();
            write_shell_word(&mut s, word, true).unwrap();
            assert_eq!(&s, first, "{word:?} first");
            assert_eq!(&shell_word(word), later, "{word:?} later");
        }
    }

    /// The quoted words, read back by real shells (dash, and bash in POSIX mode as Fedora's
    /// /bin/sh), give the words back, one argument each.
    #[test]
    fn dash_and_bash_read_quoted_words_back() {
        let words: Vec<&str> = NASTY.iter().copied().chain(["", "a b", "=x"]).collect();
        let line = shell_line(&words);
        for shell in [&["dash", "-c"][..], &["bash", "--posix", "-c"]] {
            let out = std::process::Command::new(shell[0])
                .args(&shell[1..])
                .arg(format!("printf '%s\\n' {line}"))
                .output()
                .unwrap_or_else(|e| panic!("{}: {e}", shell[0]));
            let got = String::from_utf8(out.stdout).unwrap();
            let want: String = words.iter().map(|w| format!("{w}\n")).collect();
            assert_eq!(got, want, "{}", shell[0]);
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
            let got = shell_line_for_recipe(*words);
            assert_eq!(&got, want);
            assert_eq!(shell_words::split(&got).unwrap(), *words);
        }
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
    fn dollars_double_through_the_writer() {
        let mut s = String::new();
        write!(Dollars(&mut s), "{}", line(&["a$b", "$", "c"])).unwrap();
        assert_eq!(s, "'a$$b' '$$' c");
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
            ("x{a,b}.o", None),
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
