//! Rsp: response files as LLVM reads and writes them — split into words by its GNU tokenizer
//! (ld.lld on Unix) or its Windows one (lld-link), and words written so that the same tokenizer
//! reads them back unchanged.
//!
//! It knows the two tokenizers' quoting rules; it does not read files or know which linker
//! takes which (`command` and `coffargs` do).

/// Splits a response file's text into words as LLVM's GNU tokenizer does (lld and clang on
/// Unix): blanks separate words; a backslash takes the next character literally, outside quotes
/// and inside double quotes; single quotes take everything up to the next single quote.
pub fn response_split(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\\' => {
                in_word = true;
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            '\'' | '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    if q == c {
                        break;
                    }
                    // Inside either quote a backslash escapes the next character, as in
                    // LLVM's GNU tokenizer (measured with ld.lld-22: `'ab\cd.o'` is abcd.o).
                    if q == '\\' {
                        if let Some(next) = chars.next() {
                            word.push(next);
                        }
                        continue;
                    }
                    word.push(q);
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// A word for a response file that `response_split` reads back as `word`: bare when it is made
/// of safe characters, else in double quotes with `\` and `"` escaped.
pub fn response_word(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b))
    {
        return word.to_string();
    }
    let mut out = String::with_capacity(word.len() + 2);
    out.push('"');
    for c in word.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Splits a response file's text into words as LLVM's Windows tokenizer does (lld-link's
/// default): blanks separate words outside double quotes; `""` inside quotes is one `"`; a run
/// of backslashes before a `"` gives half of them, and an odd one escapes the quote; other
/// backslashes are themselves.
pub fn windows_split(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' if !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\\' => {
                in_word = true;
                let mut n = 1;
                while chars.peek() == Some(&'\\') {
                    chars.next();
                    n += 1;
                }
                if chars.peek() == Some(&'"') {
                    word.extend(std::iter::repeat_n('\\', n / 2));
                    if n % 2 == 1 {
                        chars.next();
                        word.push('"');
                    }
                } else {
                    word.extend(std::iter::repeat_n('\\', n));
                }
            }
            '"' => {
                in_word = true;
                if quoted && chars.peek() == Some(&'"') {
                    chars.next();
                    word.push('"');
                } else {
                    quoted = !quoted;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// A word for a response file that `windows_split` reads back as `word`: bare when it holds no
/// blank or quote, else in double quotes, each `"` escaped and the backslashes before a `"` (or
/// before the closing quote) doubled.
pub fn windows_word(word: &str) -> String {
    if !word.is_empty() && !word.contains([' ', '\t', '\n', '\r', '"']) {
        return word.to_string();
    }
    let mut out = String::with_capacity(word.len() + 2);
    out.push('"');
    let mut backslashes = 0;
    for c in word.chars() {
        match c {
            '\\' => backslashes += 1,
            '"' => {
                out.extend(std::iter::repeat_n('\\', backslashes + 1));
                backslashes = 0;
            }
            _ => backslashes = 0,
        }
        out.push(c);
    }
    out.extend(std::iter::repeat_n('\\', backslashes));
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_files_split_as_llvm_reads_them() {
        let table: &[(&str, &[&str])] = &[
            ("a b\tc\n", &["a", "b", "c"]),
            ("  ", &[]),
            ("'a b' \"c d\"", &["a b", "c d"]),
            ("a\\ b", &["a b"]),
            ("\"a\\\"b\"", &["a\"b"]),
            ("'a\\b'", &["ab"]),
            ("'a\\'b'", &["a'b"]),
            ("x\"y z\"w", &["xy zw"]),
            ("\"\"", &[""]),
            ("lib.a(m.o at 80)", &["lib.a(m.o", "at", "80)"]),
        ];
        for (text, want) in table {
            assert_eq!(response_split(text), *want, "{text:?}");
        }
    }

    #[test]
    fn response_words_read_back_unchanged() {
        for word in [
            "a.o",
            "",
            "a b",
            "x\"y",
            "back\\slash",
            "it's",
            "lib.a(m.o at 80)",
            "tab\there",
            "new\nline",
            "{a,b}",
            "$HOME",
        ] {
            let text = format!("{} {}", response_word(word), response_word("next"));
            assert_eq!(response_split(&text), [word, "next"], "{word:?}");
        }
        assert_eq!(response_word("-o"), "-o");
        assert_eq!(response_word("a b"), "\"a b\"");
    }

    #[test]
    fn windows_response_files_split_as_llvm_reads_them() {
        let table: &[(&str, &[&str])] = &[
            ("a b\tc\r\n", &["a", "b", "c"]),
            ("\"a b\" c", &["a b", "c"]),
            ("C:\\dir\\a.obj", &["C:\\dir\\a.obj"]),
            ("a\\\\\"b c\"", &["a\\b c"]),
            ("a\\\"b", &["a\"b"]),
            ("\"x\"\"y\"", &["x\"y"]),
            ("\"\"", &[""]),
            ("'a b'", &["'a", "b'"]),
            ("x\"y z\"w", &["xy zw"]),
            ("\"new\nline\"", &["new\nline"]),
        ];
        for (text, want) in table {
            assert_eq!(windows_split(text), *want, "{text:?}");
        }
    }

    #[test]
    fn windows_response_words_read_back_unchanged() {
        for word in [
            "a.obj",
            "",
            "lib odd #1.lib",
            "x\"y",
            "C:\\dir\\",
            "dir with space\\",
            "a\\\"b",
            "it's",
            "tab\there",
            "new\nline",
            "$HOME",
        ] {
            let text = format!("{} {}", windows_word(word), windows_word("next"));
            assert_eq!(windows_split(&text), [word, "next"], "{word:?}");
        }
        assert_eq!(windows_word("/out:a.exe"), "/out:a.exe");
        assert_eq!(windows_word("a b\\"), "\"a b\\\\\"");
    }
}
