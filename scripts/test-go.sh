#!/usr/bin/env bash
# Tests of the Go binding (bindings/go): installs Debian's golang-go if go is
# missing, builds the library, then runs go vet, go test, go test -race and
# the per-op benchmark against the same loop in C.
#
# The package finds the in-tree library through a pkg-config file written to
# bindings/go/build/pkgconfig (include/ and target/release, with an rpath).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

if ! command -v go >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq golang-go
fi
go version

cargo build --release -p tensorasync-capi --quiet
MAJOR=$(sed -n 's/^version *= *"\([0-9]*\)\..*/\1/p' Cargo.toml | head -n 1)
ln -sf libtensorasync.so "target/release/libtensorasync.so.$MAJOR"

PC_DIR=$ROOT/bindings/go/build/pkgconfig
mkdir -p "$PC_DIR"
cat > "$PC_DIR/tensorasync.pc" <<PC
Name: tensorasync
Description: tensorasync, in-tree build
Version: $(sed -n 's/^version *= *"\([^"]*\)".*/\1/p' Cargo.toml | head -n 1)
Cflags: -I$ROOT/include
Libs: -L$ROOT/target/release -Wl,-rpath,$ROOT/target/release -ltensorasync
PC
export PKG_CONFIG_PATH=$PC_DIR${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export GOPROXY=off GOFLAGS=-mod=mod

cd bindings/go
go vet ./...
go test -count=1 -timeout 180s ./...
go test -count=1 -race -timeout 300s ./...
# Per-op cost: the Go binding and the same loop in C, in one run.
go test -run '^$' -bench 'ScaleChain' -benchtime 100000x -count 3 .
