#!/usr/bin/env bash
# A private Docker engine for the test suite and CI: Debian's docker.io, started by hand
# (no systemd) under its own root, socket and pid file, plus an offline Python base image
# (no registry is reachable from CI machines). iproute2 and openssl: the remote-daemon test
# starts a second dockerd on a bridge of its own, with TLS certificates it makes
# (tests/support/remote_dockerd.py).
#
#   bash .ci/dockerd.sh up     install if missing, start dockerd, build the base image
#   bash .ci/dockerd.sh down   stop that dockerd by its pid and undo its mounts
#   bash .ci/dockerd.sh env    print the DOCKER_HOST line to eval
#
# Settings: GOMGR_DOCKER_ROOT (default /tmp/gomgr-docker), GOMGR_BASE_IMAGE
# (default gomgr-base/python:3.11-bookworm), DEBIAN_MIRROR.
set -euo pipefail
ROOT=${GOMGR_DOCKER_ROOT:-/tmp/gomgr-docker}
SOCK=$ROOT/docker.sock
PIDFILE=$ROOT/dockerd.pid
BASE=${GOMGR_BASE_IMAGE:-gomgr-base/python:3.11-bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
export DOCKER_HOST=unix://$SOCK
SECONDS=0
log() { echo "[dockerd.sh ${SECONDS}s] $*"; }

daemon_answers() { docker version >/dev/null 2>&1; }

install_packages() {
  command -v dockerd >/dev/null && command -v debootstrap >/dev/null \
    && command -v ip >/dev/null && command -v openssl >/dev/null && return
  [ "$(id -u)" = 0 ] || { echo "dockerd.sh: installing docker.io needs root" >&2; exit 1; }
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    docker.io debootstrap iproute2 openssl >/dev/null
  log "installed docker.io, debootstrap, iproute2 and openssl"
}

start_daemon() {
  daemon_answers && { log "dockerd already answers at $DOCKER_HOST"; return; }
  mkdir -p "$ROOT"
  nohup dockerd --data-root "$ROOT/data" --exec-root "$ROOT/exec" --pidfile "$PIDFILE" \
    -H "unix://$SOCK" --storage-driver overlay2 >"$ROOT/dockerd.log" 2>&1 &
  for _ in $(seq 1 120); do daemon_answers && break; sleep 0.5; done
  daemon_answers || { tail -50 "$ROOT/dockerd.log" >&2; exit 1; }
  log "dockerd up (pid $(cat "$PIDFILE")) at $DOCKER_HOST"
}

# NOTE: debootstrap of a minimal bookworm with python3 and venv, imported as an image: the
# CPU engine image builds FROM it where Docker Hub cannot be reached.
build_base_image() {
  docker image inspect "$BASE" >/dev/null 2>&1 && { log "base image $BASE present"; return; }
  local rootfs=$ROOT/rootfs
  rm -rf "$rootfs"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$rootfs" "$MIRROR" >"$ROOT/debootstrap.log" 2>&1 \
    || { tail -30 "$ROOT/debootstrap.log" >&2; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$BASE" >/dev/null
  rm -rf "$rootfs"
  log "base image $BASE built"
}

stop_daemon() {
  if daemon_answers; then
    docker ps -aq --filter label=gomgr.engine-id | xargs -r docker rm -f >/dev/null 2>&1 || true
  fi
  if [ -s "$PIDFILE" ]; then
    local pid
    pid=$(cat "$PIDFILE")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    log "dockerd (pid $pid) stopped"
  fi
  # NOTE: dockerd leaves its netns bind mounts under the exec root even after a clean exit.
  grep " $ROOT/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l || true
}

case "${1:-}" in
  up) install_packages; start_daemon; build_base_image; log "export DOCKER_HOST=$DOCKER_HOST" ;;
  down) stop_daemon ;;
  env) echo "export DOCKER_HOST=$DOCKER_HOST" ;;
  *) echo "usage: bash .ci/dockerd.sh up|down|env" >&2; exit 2 ;;
esac
