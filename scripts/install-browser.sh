#!/usr/bin/env bash
# Installs Debian's Chromium for the browser test (tests/test_explorer.py) and the chapter screenshots
# (scripts/screenshots.py). Idempotent: does nothing when `chromium` is already on PATH.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core
command -v chromium
