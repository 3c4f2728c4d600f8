//! Remote: the remote options — how a link reaches a Remote Execution API server — the server, its
//! headers (whose values are never printed), TLS files, the cache policies, the timeout and the
//! keys — read into `remote::Options`.
//!
//! It knows these options and reads the files they name (headers, TLS); it does not connect.

use super::given::{as_given, user_path};
use camino::Utf8PathBuf;
use clap::Args;

/// Running jobs on a Remote Execution API server (BuildGrid, Buildbarn, BuildBuddy, NativeLink).
#[derive(Debug, Args, Clone, Default)]
pub struct RemoteArgs {
    /// Run jobs on this Remote Execution API server: grpc://HOST:PORT, grpcs://HOST:PORT (TLS)
    /// or unix:PATH.
    #[arg(long, value_name = "URL", env = "DTLTO_BRIDGE_REMOTE")]
    pub remote: Option<String>,

    /// The server's instance name.
    #[arg(
        long,
        value_name = "NAME",
        env = "DTLTO_BRIDGE_REMOTE_INSTANCE",
        default_value = ""
    )]
    pub remote_instance: String,

    /// A header sent with every call, such as an API key; repeatable (in the variable: comma
    /// separated).
    #[arg(long, value_name = "NAME=VALUE", env = "DTLTO_BRIDGE_REMOTE_HEADER", value_delimiter = ',', value_parser = header)]
    pub remote_header: Vec<Header>,

    /// Read headers from FILE, one NAME=VALUE a line (keeps keys out of `ps` and build logs).
    #[arg(long, value_name = "FILE", env = "DTLTO_BRIDGE_REMOTE_HEADER_FILE", value_parser = user_path)]
    pub remote_header_file: Option<Utf8PathBuf>,

    /// A platform property the workers must have (OSFamily=linux, container-image=...);
    /// repeatable (in the variable: comma separated).
    #[arg(long, value_name = "KEY=VALUE", env = "DTLTO_BRIDGE_REMOTE_PLATFORM", value_delimiter = ',', value_parser = key_value)]
    pub remote_platform: Vec<(String, String)>,

    /// Jobs in flight on the server at once.
    #[arg(long, value_name = "N", env = "DTLTO_BRIDGE_REMOTE_JOBS", default_value = "64", value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub remote_jobs: u32,

    /// Neither read nor write the server's action cache.
    #[arg(long, env = "DTLTO_BRIDGE_REMOTE_NO_CACHE", value_parser = clap::builder::BoolishValueParser::new())]
    pub remote_no_cache: bool,

    /// How long a call that moves no blob may take, and a stream that owes a message may be
    /// silent, in seconds (transfers get a second more per MiB): a server that hangs costs this.
    #[arg(long, value_name = "SECONDS", env = "DTLTO_BRIDGE_REMOTE_TIMEOUT", default_value = "20", value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub remote_timeout: u32,

    /// Read the action cache but never write it: no link entry (for farms where only CI or the
    /// workers write; as Bazel's --remote_upload_local_results=false).
    #[arg(long, env = "DTLTO_BRIDGE_REMOTE_NO_CACHE_WRITE", value_parser = clap::builder::BoolishValueParser::new())]
    pub remote_no_cache_write: bool,

    /// Take only each job's own result from the action cache: neither read nor write the
    /// link's entry (one entry for all of a link's jobs, which a client that may write the
    /// cache could point at other objects).
    #[arg(long, env = "DTLTO_BRIDGE_REMOTE_NO_LINK_ENTRY", value_parser = clap::builder::BoolishValueParser::new())]
    pub remote_no_link_entry: bool,

    /// Keep remote jobs' outputs in DIR too, by digest: a relink's job with the action it had
    /// in the last link here takes them from DIR (copied, checked against their digests)
    /// without asking the server (as Bazel's --disk_cache). DIR must be the user's own,
    /// writable by no one else. Needs the history; outputs unused for 7 days are removed.
    #[arg(long, value_name = "DIR", env = "DTLTO_BRIDGE_REMOTE_DISK_CACHE", value_parser = user_path)]
    pub remote_disk_cache: Option<Utf8PathBuf>,

    /// A PEM file of the authorities that sign the server's certificate (grpcs://), instead of
    /// the system's.
    #[arg(long, value_name = "FILE", env = "DTLTO_BRIDGE_REMOTE_CA", value_parser = user_path)]
    pub remote_ca: Option<Utf8PathBuf>,

    /// A PEM file of this client's certificate, for servers that require mutual TLS (grpcs://);
    /// needs --remote-client-key.
    #[arg(long, value_name = "FILE", env = "DTLTO_BRIDGE_REMOTE_CLIENT_CERT", value_parser = user_path, requires = "remote_client_key")]
    pub remote_client_cert: Option<Utf8PathBuf>,

    /// A PEM file of the private key of --remote-client-cert.
    #[arg(long, value_name = "FILE", env = "DTLTO_BRIDGE_REMOTE_CLIENT_KEY", value_parser = user_path, requires = "remote_client_cert")]
    pub remote_client_key: Option<Utf8PathBuf>,

    /// The workers mount the input root at / : jobs with absolute paths may run remotely too.
    #[arg(long, env = "DTLTO_BRIDGE_REMOTE_ABSOLUTE_PATHS", value_parser = clap::builder::BoolishValueParser::new())]
    pub remote_absolute_paths: bool,

    /// How each job's action names its files, and so what its action-cache key depends on.
    #[arg(
        long,
        value_name = "HOW",
        value_enum,
        env = "DTLTO_BRIDGE_REMOTE_KEY",
        default_value = "content"
    )]
    pub remote_key: RemoteKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum RemoteKey {
    /// By what the files hold: modules by digest, the index shard's module table rewritten to
    /// match; the same action in every link and checkout. A job it cannot be sure of is keyed
    /// by names, and the report says why.
    #[default]
    Content,
    /// By where the files are and what lld named them (archive members with lld's pid in their
    /// names; only the job's own object and shard renamed): an action shared only with links that
    /// name everything alike.
    Names,
}

/// A header as the user gave it (`--remote-header`, a line of `--remote-header-file`), whose
/// value is never printed: it may be a key. One that is not NAME=VALUE has no name, and is
/// refused when the options are read, without its text.
#[derive(Clone, Default)]
pub struct Header {
    pub name: String,
    pub value: String,
}

impl std::fmt::Debug for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}=<{} bytes, not shown>", self.name, self.value.len())
    }
}

impl Header {
    /// Whether it is NAME=VALUE with NAME an HTTP header name: a line split at an `=` inside
    /// its value (`Authorization: Basic dXNlcjpTRUNSRVQ=`) is not, and its would-be name holds
    /// the key.
    fn well_formed(&self) -> bool {
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        !self.name.is_empty() && self.name.chars().all(token)
    }
}

/// A header's text, split at its first `=`; never an error here (clap would print the text).
fn header(text: &str) -> Result<Header, String> {
    Ok(match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Header {
            name: k.to_string(),
            value: v.to_string(),
        },
        _ => Header::default(),
    })
}

/// NAME=VALUE, NAME not empty.
fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{text:?} is not NAME=VALUE")),
    }
}

impl RemoteArgs {
    /// The remote options, or None when no server is named; an error for a header file that
    /// cannot be read.
    pub fn options(&self) -> Result<Option<crate::remote::Options>, String> {
        let Some(url) = &self.remote else {
            return Ok(None);
        };
        let mut headers = Vec::new();
        for (n, h) in self.remote_header.iter().enumerate() {
            if !h.well_formed() {
                return Err(format!(
                    "read --remote-header (or DTLTO_BRIDGE_REMOTE_HEADER): header {} is not \
                     NAME=VALUE with a NAME of letters, digits and -_. (its text is not shown: \
                     it may hold a key)",
                    n + 1
                ));
            }
            headers.push((h.name.clone(), h.value.clone()));
        }
        if let Some(path) = &self.remote_header_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("read --remote-header-file {path}: {e}"))?;
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let h = header(line)?;
                if !h.well_formed() {
                    return Err(format!(
                        "read --remote-header-file {path}: line {} is not NAME=VALUE with a NAME \
                         of letters, digits and -_. (its text is not shown: it may hold a key)",
                        n + 1
                    ));
                }
                headers.push((h.name, h.value));
            }
        }
        Ok(Some(crate::remote::Options {
            target: crate::remote::reapi::Target {
                url: url.clone(),
                instance: self.remote_instance.clone(),
                headers,
                timeout: std::time::Duration::from_secs(u64::from(self.remote_timeout)),
                tls: self.tls()?,
            },
            jobs: self.remote_jobs as usize,
            cache: !self.remote_no_cache,
            cache_write: !self.remote_no_cache_write,
            link_entry: !self.remote_no_link_entry,
            platform: self.remote_platform.clone(),
            root_is_slash: self.remote_absolute_paths,
            by_content: self.remote_key == RemoteKey::Content,
            memo: None,
            disk: self.remote_disk_cache.clone().map(Into::into),
        }))
    }
}

impl RemoteArgs {
    /// The TLS files, read; an error names the option a file came from.
    fn tls(&self) -> Result<crate::remote::reapi::Tls, String> {
        let read = |option: &str, path: &Option<Utf8PathBuf>| -> Result<Option<Vec<u8>>, String> {
            let Some(path) = path else {
                return Ok(None);
            };
            let pem = std::fs::read(path).map_err(|e| format!("read {option} {path}: {e}"))?;
            if !pem.windows(11).any(|w| w == b"-----BEGIN ") {
                return Err(format!(
                    "read {option} {path}: not a PEM file (no -----BEGIN line)"
                ));
            }
            Ok(Some(pem))
        };
        let url = self.remote.as_deref().unwrap_or_default();
        if !crate::remote::reapi::uses_tls(url) {
            let given = [
                ("--remote-ca", &self.remote_ca),
                ("--remote-client-cert", &self.remote_client_cert),
            ];
            if let Some((option, path)) = given.iter().find(|(_, path)| path.is_some()) {
                let path = path.as_ref().map(|p| p.as_str()).unwrap_or_default();
                return Err(format!(
                    "use {}: {} is not a TLS server (grpcs://HOST:PORT)",
                    as_given(option, path),
                    as_given("--remote", url)
                ));
            }
        }
        let cert = read("--remote-client-cert", &self.remote_client_cert)?;
        let key = read("--remote-client-key", &self.remote_client_key)?;
        Ok(crate::remote::reapi::Tls {
            ca: read("--remote-ca", &self.remote_ca)?,
            identity: cert.zip(key),
        })
    }
}
