//! Digest: SHA-256 in lower-case hex, digests of word lists that no two lists share, and
//! stable file names hashed from a key.
//!
//! It knows sha2; it does not know what is digested.

use sha2::{Digest, Sha256};

/// The SHA-256 of `bytes`, in lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(Sha256::digest(bytes))
}

/// Lower-case hex of a SHA-256 (the digest crate's own formatting, in one buffer).
pub fn hex(digest: sha2::digest::Output<Sha256>) -> String {
    format!("{digest:x}")
}

/// A digest of words, each taken with its length so that no two lists give the same bytes.
#[derive(Default)]
pub struct Words(sha2::Sha256);

impl Words {
    pub fn word(&mut self, w: &str) {
        self.bytes(w.as_bytes());
    }

    /// A word of any bytes, taken with its length as `word` takes text.
    pub fn bytes(&mut self, b: &[u8]) {
        use sha2::Digest;
        self.0.update((b.len() as u64).to_le_bytes());
        self.0.update(b);
    }

    pub fn list<'a>(&mut self, words: impl Iterator<Item = &'a str>) {
        let words: Vec<&str> = words.collect();
        self.word(&words.len().to_string());
        for w in words {
            self.word(w);
        }
    }

    pub fn finish(self) -> String {
        use sha2::Digest;
        crate::job::util::digest::hex(self.0.finalize())
    }
}

/// A file name of 16 hex digits that stays the same for the same `parts` (the first 8 bytes of
/// the SHA-256 of the parts joined by NUL bytes).
pub fn stable_name(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            h.update([0]);
        }
        h.update(part);
    }
    hex(h.finalize())[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_lower_case_hex_of_64_digits() {
        // The SHA-256 of nothing and of "abc" (FIPS 180-2).
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn stable_names_are_the_first_8_bytes_of_the_joined_parts_digest() {
        // sha256("a\0b")
        assert_eq!(stable_name(&[b"a", b"b"]), &sha256_hex(b"a\0b")[..16]);
        assert_eq!(stable_name(&[b"a", b"b"]).len(), 16);
        assert_ne!(stable_name(&[b"a", b"b"]), stable_name(&[b"ab"]));
    }
}
