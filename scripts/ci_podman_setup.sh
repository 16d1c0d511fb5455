#!/usr/bin/env bash
# Bring up Podman on a Debian 12 machine (root, no container registry reachable), rootful and rootless,
# each with its own API service and the test images. Idempotent: a second call takes ~1 s.
#
#   sudo scripts/ci_podman_setup.sh
#
# Rootful: `podman system service` on /run/podman/podman.sock (no systemd here, so it is started directly).
# Rootless: the user $PODMAN_USER (created, with subordinate uid/gid ranges) runs its own service on
#   /run/user/<uid>/podman/podman.sock with its own image store ($HOME/.local/share/containers).
# Images: local/busybox:ci and local/bookworm:ci, copied from the Docker engine (`docker save | podman load`;
#   scripts/ci_docker_setup.sh builds them from local root filesystems, nothing is pulled).
# Service logs and pids are under $STATE.
set -euo pipefail
STATE=${STATE:-/tmp/ci-podman}
PODMAN_USER=${PODMAN_USER:-hermes-podman}
IMAGES=(local/busybox:ci local/bookworm:ci)
ROOTFUL_SOCK=/run/podman/podman.sock
CONF=/etc/containers/containers.conf
mkdir -p "$STATE"
chmod 755 "$STATE"
say() { echo "[podman-setup] $*"; }
t0=$SECONDS

# 1. packages from Debian main: podman 4.3 and what rootless needs (newuidmap, slirp4netns), an init
#    for --init (catatonit) and runc (crun 1.8 refuses cgroup v1 hosts with a cgroup2 mount: "hybrid mode").
need=()
for pkg in podman uidmap slirp4netns catatonit runc; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  say "installed ${need[*]} ($((SECONDS - t0)) s)"
fi

# 2. engine settings for machines like CI containers, read by rootful and rootless podman alike: no systemd
#    (cgroupfs, events in a file), cgroup v1 (runc), and no CAP_SYS_RESOURCE (podman's default rlimits,
#    nofile=1048576 and a high nproc, cannot be set: keep them within this process's hard limits).
if [ ! -e "$CONF" ] || grep -q "ci_podman_setup.sh" "$CONF"; then
  manager=systemd events=journald runtime=crun
  [ -d /run/systemd/system ] || { manager=cgroupfs events=file; }
  [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] || runtime=runc
  nofile=$(ulimit -Hn)
  nproc=$(ulimit -Hu)
  [ "$nofile" = unlimited ] && nofile=1048576
  { [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; } && nproc=32768
  mkdir -p "$(dirname "$CONF")"
  cat >"$CONF.tmp" <<EOF
# Written by hermes-runner scripts/ci_podman_setup.sh (rewritten by each run while this line is here).
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
cgroup_manager = "$manager"
events_logger = "$events"
runtime = "$runtime"
EOF
  mv "$CONF.tmp" "$CONF"
fi

answers() {  # $1 = socket
  podman --remote --url "unix://$1" images -q >/dev/null 2>&1
}
wait_up() {  # $1 = socket, $2 = pid
  for _ in $(seq 1 120); do
    answers "$1" && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.25
  done
  return 1
}
cwd_gone() {  # $1 = pid: its working directory was deleted (a service started from a checkout since removed:
  # conmon then fails "Failed to get working directory" and no container starts)
  [ -n "$1" ] && [ -e "/proc/$1/cwd" ] && readlink "/proc/$1/cwd" | grep -q ' (deleted)$'
}
start_service() {  # $1 = name, $2 = socket, then the command prefix that runs podman as its user
  local name=$1 sock=$2 old
  shift 2
  old=$(cat "$STATE/$name.pid" 2>/dev/null || true)
  if answers "$sock" && ! cwd_gone "$old"; then return 0; fi
  if [ -n "$old" ] && kill -0 "$old" 2>/dev/null; then
    say "stopping the $name podman service (pid $old): not answering, or its working directory is gone"
    kill -- "-$old" 2>/dev/null || kill "$old" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$old" 2>/dev/null || break; sleep 0.25; done
  fi
  changed=1
  rm -f "$sock"
  # From /, so the service (and every conmon it starts) never sits in a directory that may be removed.
  (cd / && exec setsid nohup "$@" podman system service --time=0 "unix://$sock") >"$STATE/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE/$name.pid"
  if ! wait_up "$sock" "$(cat "$STATE/$name.pid")"; then
    say "the $name podman service did not come up; last lines of $STATE/$name.log:"
    tail -20 "$STATE/$name.log" >&2
    exit 1
  fi
  say "$name podman service started on $sock (pid $(cat "$STATE/$name.pid"), log $STATE/$name.log)"
}
load_images() {  # $1 = socket: copy the test images from the Docker engine into that store
  for img in "${IMAGES[@]}"; do
    podman --remote --url "unix://$1" image exists "$img" && continue
    docker image inspect "$img" >/dev/null 2>&1 || { say "$img is not in Docker (run scripts/ci_docker_setup.sh)"; exit 1; }
    docker save "$img" | podman --remote --url "unix://$1" load >/dev/null
    changed=1
    say "loaded $img into the store behind $1"
  done
}
smoke() {  # $1 = socket, then extra options: one container with the sandbox's isolation options
  local sock=$1
  shift
  [ "$changed" = 1 ] || return 0
  podman --remote --url "unix://$sock" run --rm --network none --read-only --cap-drop ALL \
    --security-opt no-new-privileges --init --user 1000:1000 "$@" local/busybox:ci true
}
changed=0

# 3. rootful
mkdir -p "$(dirname "$ROOTFUL_SOCK")"
start_service rootful "$ROOTFUL_SOCK" env
load_images "$ROOTFUL_SOCK"
smoke "$ROOTFUL_SOCK" --memory 64m --pids-limit 32

# 4. rootless: a user with subordinate ids, a runtime dir of its own, its service, its store
if ! id "$PODMAN_USER" >/dev/null 2>&1; then
  useradd --create-home --shell /usr/sbin/nologin "$PODMAN_USER"
  say "created user $PODMAN_USER"
fi
# Subordinate ids: the runner gives each rootless container on cgroup v1 a uid range of its own (--userns=auto,
# 2048 ids, or 65536 for a user `nobody`), so the range holds SUBIDS / 2048 containers at once. (An existing,
# smaller range is left as it is: growing it means `podman system migrate` and a restart of the service.)
SUBIDS=${PODMAN_SUBIDS:-1048576}
for f in /etc/subuid /etc/subgid; do
  if ! grep -q "^$PODMAN_USER:" "$f" 2>/dev/null; then
    base=$(awk -F: 'BEGIN { m = 100000 } { e = $2 + $3; if (e > m) m = e } END { print m }' "$f" 2>/dev/null || echo 100000)
    echo "$PODMAN_USER:$base:$SUBIDS" >>"$f"
  fi
done
uid=$(id -u "$PODMAN_USER")
run_dir=/run/user/$uid
mkdir -p "$run_dir/podman"
chown -R "$PODMAN_USER:" "$run_dir" && chmod 700 "$run_dir"
as_user=(runuser -u "$PODMAN_USER" -- env "HOME=$(getent passwd "$PODMAN_USER" | cut -d: -f6)" "XDG_RUNTIME_DIR=$run_dir")
rootless_sock=$run_dir/podman/podman.sock
(cd / && start_service rootless "$rootless_sock" "${as_user[@]}")
changed=0
load_images "$rootless_sock"
smoke "$rootless_sock" --userns=auto:size=2048  # (no cgroup limits on cgroup v1: the runner uses rlimits)
say "podman ready, rootful $ROOTFUL_SOCK and rootless ($PODMAN_USER) $rootless_sock ($((SECONDS - t0)) s)"
