#!/usr/bin/env bash
# with_umask.sh I COMMAND...: runs COMMAND with umask 022 when I is 0, else 027.
# Used as the launcher's WRAP ('bash tests/multihost/with_umask.sh {i}'): what
# process 0 creates is readable by others, what the other processes create is
# not, so a test can tell from a file's mode which kind of process created it.
set -euo pipefail
if [[ "$1" == "0" ]]; then umask 022; else umask 027; fi
shift
exec "$@"
