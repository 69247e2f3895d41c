# Sourced by fedraft's scripts: one build directory outside the clone, reused across runs.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/fedraft-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# RocksDB's C++ takes 10 to 20 minutes on two cores, and librocksdb-sys rebuilds it whenever its
# build script's own dependencies resolve to other features (a different `-p` selection, a new
# dependency anywhere in the workspace). scripts/rocksdb-lib compiles it once per librocksdb-sys
# version into this cache; with ROCKSDB_LIB_DIR set, every later build only links it.
FEDRAFT_ROCKSDB_VERSION="$(awk '/^name = "librocksdb-sys"$/ {getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock 2>/dev/null)"
export FEDRAFT_ROCKSDB_CACHE="${FEDRAFT_ROCKSDB_CACHE:-$HOME/.cache/fedraft-rocksdb/librocksdb-sys-${FEDRAFT_ROCKSDB_VERSION:-unknown}}"
if [ -f "$FEDRAFT_ROCKSDB_CACHE/librocksdb.a" ]; then
  export ROCKSDB_LIB_DIR="$FEDRAFT_ROCKSDB_CACHE" ROCKSDB_STATIC=1
fi
# Opt-in, for benchmarking release binaries: FEDRAFT_ROCKSDB_OPT=1 links the optimized library that
# `scripts/rocksdb-lib --release` built. Use it for `cargo build --release` only: switching the
# library relinks everything above librocksdb-sys, so debug builds and CI keep the -O0 one.
# On x86_64 that library is compiled for Haswell and later (SSE4.2 gives RocksDB hardware CRC32C
# for every WAL record and block; without it RocksDB falls back to a table-driven CRC).
if [ "$(uname -m)" = x86_64 ]; then
  export FEDRAFT_ROCKSDB_OPT_CACHE="${FEDRAFT_ROCKSDB_OPT_CACHE:-$FEDRAFT_ROCKSDB_CACHE-opt-haswell}"
else
  export FEDRAFT_ROCKSDB_OPT_CACHE="${FEDRAFT_ROCKSDB_OPT_CACHE:-$FEDRAFT_ROCKSDB_CACHE-opt}"
fi
if [ "${FEDRAFT_ROCKSDB_OPT:-0}" = 1 ]; then
  if [ -f "$FEDRAFT_ROCKSDB_OPT_CACHE/librocksdb.a" ]; then
    export ROCKSDB_LIB_DIR="$FEDRAFT_ROCKSDB_OPT_CACHE" ROCKSDB_STATIC=1
  else
    echo "env.sh: FEDRAFT_ROCKSDB_OPT=1 but $FEDRAFT_ROCKSDB_OPT_CACHE/librocksdb.a is missing (scripts/rocksdb-lib --release); using the default library" >&2
  fi
fi
