#!/usr/bin/env bash
# Install headless Chromium (Debian's `chromium` package) for the trend-page test (tests marked `chromium`).
# Idempotent: does nothing when a chromium binary is already on PATH (or $MOE_SWEEP_CHROMIUM points at one).
# The tests find the binary through $MOE_SWEEP_CHROMIUM, then `chromium`, then `chromium-browser` on PATH.
set -euo pipefail
if [ -n "${MOE_SWEEP_CHROMIUM:-}" ] && [ -x "${MOE_SWEEP_CHROMIUM}" ]; then exit 0; fi
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "chromium is missing and this is not root: run 'apt-get install -y chromium' as root" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium >/dev/null
echo "chromium installed: $(chromium --version 2>/dev/null || echo unknown version)"
