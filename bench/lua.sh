# Sourced by bench/run.sh and bench/remote.sh: sets $lua to the Lua 5.4 sources, fetched through
# cargo from crates.io (the lua-src crate) into its registry cache, never committed.
source "$root/bench/crate.sh"
lua=$(crate_source lua-src 551.1.0 lua-5.4.9)
