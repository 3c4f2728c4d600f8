//! Digest: SHA-256 and BLAKE3 in lower-case hex, whether a word is such a digest, digests of
//! word lists that no two lists share (BLAKE3), and stable file names hashed from a key.
//!
//! It knows ring's SHA-256 (its assembly runs at about twice the pure-Rust speed where the CPU
//! has no SHA instructions: a relink hashes every object it takes) and the blake3 crate; it
//! does not know what is digested (but that a server knows only SHA-256: `Words` are for what
//! stays on this machine).

use ring::digest::{Context, SHA256};

/// The SHA-256 of `bytes`, in lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&SHA256, bytes).as_ref())
}

/// A SHA-256 fed in pieces.
pub struct Sha256(Context);

impl Default for Sha256 {
    fn default() -> Sha256 {
        Sha256(Context::new(&SHA256))
    }
}

impl Sha256 {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The digest, in lower-case hex.
    pub fn finish(self) -> String {
        hex(self.0.finish().as_ref())
    }
}

/// A BLAKE3 fed in pieces.
#[derive(Default)]
pub struct Blake3(blake3::Hasher);

impl Blake3 {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The digest, in lower-case hex.
    pub fn finish(self) -> String {
        hex(self.0.finalize().as_bytes())
    }
}

/// Whether `w` is a digest as this module writes them (and REAPI does): 64 lower-case hex
/// digits.
pub fn is_hex_digest(w: &str) -> bool {
    w.len() == 64 && w.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Lower-case hex of a digest's bytes.
fn hex(digest: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(digest.len() * 2);
    for b in digest {
        text.push(char::from(DIGITS[usize::from(b >> 4)]));
        text.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    text
}

/// A digest of words, each taken with its length so that no two lists give the same bytes.
/// BLAKE3, not SHA-256: these digests name what this machine remembers from one link to the
/// next (a job's action, a shard's rewrite) and are never a blob's digest on a server, and
/// BLAKE3 takes a few times less CPU (a relink digests every job's shard).
#[derive(Default)]
pub struct Words(Blake3);

impl Words {
    pub fn word(&mut self, w: &str) {
        self.bytes(w.as_bytes());
    }

    /// A word of any bytes, taken with its length as `word` takes text.
    pub fn bytes(&mut self, b: &[u8]) {
        self.0.update(&(b.len() as u64).to_le_bytes());
        self.0.update(b);
    }

    pub fn list<'a>(&mut self, words: impl Iterator<Item = &'a str>) {
        let words: Vec<&str> = words.collect();
        self.word(&words.len().to_string());
        for w in words {
            self.word(w);
        }
    }

    /// The digest, in lower-case hex.
    pub fn finish(self) -> String {
        self.0.finish()
    }
}

/// A file name of 16 hex digits that stays the same for the same `parts` (the first 8 bytes of
/// the SHA-256 of the parts joined by NUL bytes).
pub fn stable_name(parts: &[&[u8]]) -> String {
    let mut h = Sha256::default();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            h.update(&[0]);
        }
        h.update(part);
    }
    h.finish()[..16].to_string()
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
    fn a_digest_fed_in_pieces_is_the_digest_of_the_whole() {
        let mut h = Sha256::default();
        h.update(b"a");
        h.update(b"");
        h.update(b"bc");
        assert_eq!(h.finish(), sha256_hex(b"abc"));
        // Over one block (64 bytes) and across blocks.
        let long = [7u8; 200];
        let mut h = Sha256::default();
        for piece in long.chunks(33) {
            h.update(piece);
        }
        assert_eq!(h.finish(), sha256_hex(&long));
        assert_eq!(
            sha256_hex(&[0u8; 64]),
            "f5a5fd42d16a20302798ef6ed309979b43003d2320d9f0e8ea9831a92759fb4b"
        );
    }

    #[test]
    fn words_are_blake3_of_each_word_after_its_length() {
        // BLAKE3 of nothing (the BLAKE3 test vectors).
        assert_eq!(
            hex(blake3::hash(b"").as_bytes()),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        let mut h = Words::default();
        h.word("ab");
        h.bytes(b"");
        let mut whole = 2u64.to_le_bytes().to_vec();
        whole.extend_from_slice(b"ab");
        whole.extend_from_slice(&0u64.to_le_bytes());
        assert_eq!(h.finish(), hex(blake3::hash(&whole).as_bytes()));
        // The length keeps apart lists that join to the same bytes.
        let (mut one, mut two) = (Words::default(), Words::default());
        one.word("ab");
        two.word("a");
        two.word("b");
        assert_ne!(one.finish(), two.finish());
    }

    #[test]
    fn stable_names_are_the_first_8_bytes_of_the_joined_parts_digest() {
        // sha256("a\0b")
        assert_eq!(stable_name(&[b"a", b"b"]), &sha256_hex(b"a\0b")[..16]);
        assert_eq!(stable_name(&[b"a", b"b"]).len(), 16);
        assert_ne!(stable_name(&[b"a", b"b"]), stable_name(&[b"ab"]));
    }
}
