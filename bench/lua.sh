# Sourced by bench/run.sh and bench/remote.sh: sets $lua to the Lua 5.4 sources, fetched through
# cargo from crates.io (the lua-src crate) into its registry cache, never committed.
fetch="$root/target/bench/fetch-lua"
mkdir -p "$fetch/src"
printf '[package]\nname = "fetch-lua"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nlua-src = "=551.1.0"\n' \
  > "$fetch/Cargo.toml"
: > "$fetch/src/lib.rs"
cargo fetch --quiet --manifest-path "$fetch/Cargo.toml"
lua=$(cargo metadata --quiet --format-version 1 --manifest-path "$fetch/Cargo.toml" |
  python3 -c 'import json,sys,os; m=json.load(sys.stdin); p=[p for p in m["packages"] if p["name"]=="lua-src"][0]; print(os.path.join(os.path.dirname(p["manifest_path"]), "lua-5.4.9"))')
