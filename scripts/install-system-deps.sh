#!/usr/bin/env bash
# Installs the Debian packages Flowport needs, only those missing, so a fresh
# machine of this kind needs nothing installed by hand.
#   usage: scripts/install-system-deps.sh run|test
set -euo pipefail
mode=${1:-run}
# JDBC drivers of the dialects Flowport speaks (portal/pipeline/dialects.py): PostgreSQL, MySQL/MariaDB, SQLite.
packages=(libldap2-dev libsasl2-dev default-jre-headless libpostgresql-jdbc-java libmariadb-java libxerial-sqlite-jdbc-java)
# javac builds the one-pass fork's jar (scripts/build-pipeline-jar.sh); any JDK 17+ on PATH will do.
command -v javac >/dev/null 2>&1 || packages+=(default-jdk-headless)
if [ "$mode" = test ]; then
  packages+=(slapd ldap-utils chromium redis-server)
  # npm installs axe-core for the browser tests; any npm on PATH will do.
  command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
fi
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "Installing system packages: ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# slapd's package starts a system daemon; the tests run their own on a free port.
if [[ " ${missing[*]} " == *" slapd "* ]]; then
  (service slapd stop || pkill -x slapd || true) >/dev/null 2>&1
fi
