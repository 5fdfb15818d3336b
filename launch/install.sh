#!/usr/bin/env bash
# Installs everything cc12m_jax needs on a fresh Debian/Ubuntu machine:
#   - a Java runtime (pycocoevalcap's PTB tokenizer and METEOR run on the JVM),
#   - the WordNet database (hypernyms for CC3M-style hypernymization),
#   - the package itself with its Python dependencies (and test extras).
# Safe to re-run: steps that are already satisfied are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(default-jre-headless)
[ -f /usr/share/wordnet/index.noun ] || need_apt+=(wordnet-base)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "[install] system packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi

PY=${PYTHON:-python3}
echo "[install] python packages (pip install -e .[test])"
"$PY" -m pip install -q --disable-pip-version-check -e ".[test]"
