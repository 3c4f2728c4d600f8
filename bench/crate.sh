# Sourced by bench/lua.sh and bench/openssl.sh. `crate_source NAME VERSION DIR` fetches the crate
# NAME at exactly VERSION from crates.io through cargo, into cargo's registry cache (never
# committed), and prints the path of DIR inside it.
crate_source() {
  local fetch="$root/target/bench/fetch-$1"
  mkdir -p "$fetch/src"
  printf '[package]\nname = "fetch-%s"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\n%s = "=%s"\n' \
    "$1" "$1" "$2" > "$fetch/Cargo.toml"
  : > "$fetch/src/lib.rs"
  cargo fetch --quiet --manifest-path "$fetch/Cargo.toml"
  cargo metadata --quiet --format-version 1 --manifest-path "$fetch/Cargo.toml" |
    python3 -c 'import json,sys,os; m=json.load(sys.stdin); p=[p for p in m["packages"] if p["name"]==sys.argv[1]][0]; print(os.path.join(os.path.dirname(p["manifest_path"]), sys.argv[2]))' "$1" "$3"
}
