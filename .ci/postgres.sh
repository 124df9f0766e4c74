#!/usr/bin/env bash
# Installs (when missing) and starts a local PostgreSQL server for the
# idempotency store's tests, and makes sure the test role and database exist.
#
# Safe to run any number of times. Progress goes to stderr; the last line on
# stdout is the connection URL the tests read from TOOLHOST_TEST_POSTGRES:
#
#   export TOOLHOST_TEST_POSTGRES="$(bash .ci/postgres.sh)"
#
# Needs root (it is run as root on developer machines and in CI).
set -euo pipefail

ROLE=toolhost
PASSWORD=toolhost
DATABASE=toolhost

log() { echo "postgres.sh: $*" >&2; }

# 1. Install the server when no PostgreSQL binaries are present.
if ! compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null; then
  log "installing postgresql"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
fi

version="$(ls /usr/lib/postgresql | sort -V | tail -n 1)"

# 2. Make sure the cluster exists (the package creates "main"; a cleaned
#    machine may have lost it).
if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" { found = 1 } END { exit !found }'; then
  log "creating cluster $version/main"
  pg_createcluster "$version" main >&2
fi

# 3. Start it unless it is already online.
if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" && $4 == "online" { found = 1 } END { exit !found }'; then
  log "starting cluster $version/main"
  pg_ctlcluster "$version" main start >&2
fi
port="$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" { print $3 }')"

for _ in $(seq 1 60); do
  if pg_isready -q -h 127.0.0.1 -p "$port"; then break; fi
  sleep 0.5
done
pg_isready -h 127.0.0.1 -p "$port" >&2

# 4. Role and database, created only when absent.
psql_admin() { runuser -u postgres -- psql -p "$port" -v ON_ERROR_STOP=1 -qtAX "$@"; }
if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$ROLE'")" != "1" ]; then
  log "creating role $ROLE"
  psql_admin -c "CREATE ROLE $ROLE LOGIN PASSWORD '$PASSWORD'"
fi
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'")" != "1" ]; then
  log "creating database $DATABASE"
  psql_admin -c "CREATE DATABASE $DATABASE OWNER $ROLE"
fi

echo "postgres://$ROLE:$PASSWORD@127.0.0.1:$port/$DATABASE"
