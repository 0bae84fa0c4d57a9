#!/usr/bin/env bash
# Installs Debian's Chromium for the browser test (tests/test_explorer.py), the book's PDF and the chapter
# screenshots (scripts/screenshots.py), and poppler-utils, whose pdftoppm and pdftotext the PDF's test reads
# the printed pages with. Idempotent: installs only what is missing from PATH.
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium fonts-dejavu-core)
command -v pdftoppm >/dev/null 2>&1 || missing+=(poppler-utils)
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
command -v chromium pdftoppm
