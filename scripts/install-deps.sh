#!/usr/bin/env bash
# Installs every build, test and run dependency of mxserve from Debian 12 packages (apt-get only).
# Idempotent: when everything is present it returns in well under a second.
#   scripts/install-deps.sh [--train]
set -euo pipefail

PKGS=(
  cmake ninja-build g++ make pkg-config git ccache
  clang clang-format clang-tidy libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libpcre2-dev libcpp-httplib-dev libcurl4-openssl-dev
  libboost1.81-dev  # Boost.Beast + Asio (header-only): the server's HTTP transport
  libopenmpi-dev openmpi-bin  # the MPI communicator (src/parallel) and its mpirun tests
  curl jq nodejs  # jq: the curl-driven server test (tests/server/curl_test.sh)
  chromium fonts-dejavu-core  # the web page's browser test (tests/webui)
)

# `install-deps.sh --train`: also what tools/train.py and the reference need (make train-model,
# make reference-fixtures), never CI. OpenBLAS: without it Debian's torch multiplies ~50x slower.
if [ "${1:-}" = "--train" ]; then
  PKGS+=(python3-torch python3-numpy python3-regex python3-jinja2 python3-matplotlib
         libopenblas0-pthread)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# npm ships inside some nodejs builds (NodeSource); Debian splits it into its own package.
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
