#!/bin/bash
# device_prep.sh — here, before a device run: fills the ignored folders the
# device_*.sh scripts carry to the GPU machine (which has no package registry):
#   .gl/      the Vulkan loader .debs (the device README's recipe)
#   .devbin/  stripped copies of bin/'s programs (the command there moves it to bin/)
#   .devlibs/ the shared libraries those programs and the test binary need,
#             except the C library's own and the Vulkan loader
#   .devdata/ the golden files (../shared/golden)
#   .devtest/ the criterion test binary
#   .devold/  with OLD_UNICORN=PATH: that `unicorn` binary (an earlier build for device_ab.sh)
# Usage: tools/device_prep.sh [BIN_DIR [TEST_BINARY]]  (defaults: bin, build/tests/unicorn-tests)
# The run then carries .gl .devbin .devlibs .devdata .devtest and starts with
# `rm -rf bin && mv .devbin bin && bash tools/device_....sh`.
set -eu
cd "$(dirname "$0")/.."
BIN=${1:-bin}
TESTBIN=${2:-build/tests/unicorn-tests}
# (git-path: in a worktree .git is a file; info/exclude lives in the common dir)
EXCLUDE=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$EXCLUDE")"
for d in .gl .devbin .devlibs .devdata .devtest .devold; do
	grep -qx "/$d/" "$EXCLUDE" 2>/dev/null || echo "/$d/" >> "$EXCLUDE"
done
if ! ls .gl/*.deb >/dev/null 2>&1; then
	mkdir -p .gl /tmp/amd64/partial
	o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
	apt-get $o update -qq
	(cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
rm -rf .devbin .devlibs .devdata .devtest .devold
mkdir -p .devbin .devlibs .devdata .devtest
if [ -n "${OLD_UNICORN:-}" ]; then
	mkdir -p .devold
	strip -o .devold/unicorn "$OLD_UNICORN"
fi
for f in "$BIN"/unicorn*; do
	case $f in *.gguf) continue ;; esac
	strip -o ".devbin/$(basename "$f")" "$f"
done
[ -x "$TESTBIN" ] && strip -o .devtest/unicorn-tests "$TESTBIN"
# every library ldd resolves, less glibc's, the compiler runtime's and the
# Vulkan loader (the device's own, or .gl's)
ldd .devbin/* .devtest/* 2>/dev/null | awk '/=> \// { print $3 }' | sort -u |
	grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libvulkan|libstdc\+\+|libgcc_s|libz)\.so' |
	while read -r lib; do cp -L "$lib" .devlibs/; done
# q4_0 only: the f32 goldens would take the call past its 64 MiB
cp ../shared/golden/gemma3-tiny-q4_0.* ../shared/golden/gemma3-tiny.json .devdata/
du -sh .gl .devbin .devlibs .devdata .devtest .devold 2>/dev/null
