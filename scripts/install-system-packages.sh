#!/usr/bin/env bash
# Installs the Debian packages the project needs that pip cannot give, in one apt-get call, only those missing
# from PATH. Idempotent: with everything in place it does nothing (no apt-get update either).
#
#   scripts/install-system-packages.sh book          Chromium and its fonts (the book's PDF, the explorer's
#                                                    browser test, scripts/screenshots.py) and poppler-utils
#                                                    (pdftoppm and pdftotext, which the PDF's test reads with)
#   scripts/install-system-packages.sh book slurm    and Debian's SLURM 22.05 and munge, for the tests on a
#                                                    real scheduler (scripts/slurm-local.sh starts it)
#   scripts/install-system-packages.sh --check slurm only says what is missing (exit 1), installs nothing
#
# `make book` asks for `book` only, so the main job never puts a scheduler's packages on a researcher's
# machine; `make setup` and `make test` ask for both. Needs root or sudo when something is missing.
set -euo pipefail
check=false
if [ "${1:-}" = "--check" ]; then check=true; shift; fi

# a command on PATH, or in /usr/sbin (where the daemons are, off a user's PATH)
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }

# sets `missing`: the packages of the named groups whose commands are absent
absent() {
    missing=()
    for group in "$@"; do
        case "$group" in
            book)
                have chromium || missing+=(chromium fonts-dejavu-core)
                have pdftoppm || missing+=(poppler-utils) ;;
            slurm)
                if ! { have slurmctld && have slurmd && have sbatch && have munged; }; then
                    missing+=(slurmctld slurmd slurm-client munge)
                fi ;;
            *) echo "install-system-packages: unknown group '$group' (book, slurm)" >&2; exit 2 ;;
        esac
    done
}

absent "$@"
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if $check; then
    echo "not installed: ${missing[*]}" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
absent "$@"
if [ ${#missing[@]} -ne 0 ]; then
    echo "install-system-packages: still missing after apt-get: ${missing[*]}" >&2
    exit 1
fi
