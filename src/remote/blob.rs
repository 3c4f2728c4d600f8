//! Blob: what a blob the server sends must be before anything uses it — of the size its digest
//! declares, no larger than an object can be (so that no declared size is ever allocated
//! unchecked), and hashing to its digest. A blob that is not is a server's lie or damage: the
//! call that brought it fails, and the job runs here.
//!
//! It knows digests and sizes; it does not know calls, jobs or files.

use bazel_remote_apis::build::bazel::remote::execution::v2 as re;

/// The largest blob taken from a server: no object of a backend job comes near it.
pub const MAX_BLOB: u64 = 4 << 30;

/// The size `d` declares, when it is one this client takes.
pub fn declared(d: &re::Digest) -> Result<usize, tonic::Status> {
    match u64::try_from(d.size_bytes) {
        Ok(size) if size <= MAX_BLOB => Ok(size as usize),
        _ => Err(tonic::Status::out_of_range(format!(
            "blob {}: the server declares {} bytes, more than the {} GiB a blob may have here",
            d.hash,
            d.size_bytes,
            MAX_BLOB >> 30
        ))),
    }
}

/// Whether `data` is the blob `d` names: its size and its SHA-256.
pub fn check(d: &re::Digest, data: &[u8]) -> Result<(), tonic::Status> {
    if data.len() as i64 != d.size_bytes {
        return Err(tonic::Status::data_loss(format!(
            "blob {}: the server sent {} bytes of its {}",
            d.hash,
            data.len(),
            d.size_bytes
        )));
    }
    let got = crate::job::util::digest::sha256_hex(data);
    if !got.eq_ignore_ascii_case(&d.hash) {
        return Err(tonic::Status::data_loss(format!(
            "blob {}: the server sent {} bytes whose SHA-256 is {got}",
            d.hash,
            data.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(hash: &str, size: i64) -> re::Digest {
        re::Digest {
            hash: hash.into(),
            size_bytes: size,
        }
    }

    #[test]
    fn a_blob_is_taken_only_with_its_size_and_hash() {
        let good = crate::remote::reapi::digest_of(b"abc");
        assert!(check(&good, b"abc").is_ok());
        let flipped = check(&good, b"abd").unwrap_err();
        assert_eq!(flipped.code(), tonic::Code::DataLoss);
        assert!(flipped.message().contains("whose SHA-256 is"), "{flipped}");
        let short = check(&good, b"ab").unwrap_err();
        assert!(short.message().contains("sent 2 bytes of its 3"), "{short}");
        let empty = crate::remote::reapi::digest_of(b"");
        assert!(check(&empty, b"").is_ok());
        assert!(check(&digest(&good.hash, 0), b"").is_err());
    }

    #[test]
    fn no_declared_size_beyond_the_limit_or_below_zero_is_taken() {
        assert_eq!(declared(&digest("h", 5)).unwrap(), 5);
        assert_eq!(declared(&digest("h", 4 << 30)).unwrap(), 4 << 30);
        for size in [(4 << 30) + 1, i64::MAX, -1] {
            let e = declared(&digest("h", size)).unwrap_err();
            assert_eq!(e.code(), tonic::Code::OutOfRange, "{size}");
        }
    }
}
