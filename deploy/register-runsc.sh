#!/usr/bin/env bash
# Registers gVisor (Debian's `runsc`, `apt-get install -y runsc`) with this machine's Docker
# engine as the runtime `runsc`, so envs can run under it (docs/security.md, gVisor):
#
#   sudo bash deploy/register-runsc.sh            # then: docker run --runtime runsc ...
#
# `--platform=ptrace` (no KVM needed) and `--network=host`: gVisor then uses the network namespace
# Docker made for the container, which Docker still isolates; with gVisor's own network stack
# Debian's 2022-12 runsc refuses to start ("cannot run with network enabled in root network
# namespace"). `--file-access=shared`: the engine writes into envs from outside (the shell's
# write_file, a verifier's tests, through the archive API), and with gVisor's default (exclusive)
# the sandbox keeps reading its cached copy of a file so rewritten. The entry is merged into /etc/docker/daemon.json (every other setting kept) and
# the engine reloads it on SIGHUP: running containers are not touched, nothing restarts.
# Idempotent: a registration with these arguments already in place changes nothing.
set -euo pipefail

CONFIG="${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}"
PIDFILE="${DOCKER_PIDFILE:-/var/run/docker.pid}"
RUNSC="$(command -v runsc)" || {
  echo "runsc is not installed: apt-get install -y runsc" >&2
  exit 1
}

registered() {
  docker info --format '{{json .Runtimes}}' | node -e '
    const rt = JSON.parse(require("fs").readFileSync(0, "utf8")).runsc;
    const args = rt && (rt.runtimeArgs || rt.RuntimeArgs || []);
    process.exit(rt && rt.path === process.argv[1] && JSON.stringify(args) === JSON.stringify(["--platform=ptrace", "--network=host", "--file-access=shared"]) ? 0 : 1);
  ' "$RUNSC"
}

if registered; then
  echo "runsc is registered with the engine ($RUNSC --platform=ptrace --network=host --file-access=shared)"
  exit 0
fi

mkdir -p "$(dirname "$CONFIG")"
node -e '
  const fs = require("fs");
  const [file, path] = process.argv.slice(1);
  let config = {};
  if (fs.existsSync(file) && fs.readFileSync(file, "utf8").trim() !== "") config = JSON.parse(fs.readFileSync(file, "utf8"));
  config.runtimes = { ...(config.runtimes || {}), runsc: { path, runtimeArgs: ["--platform=ptrace", "--network=host", "--file-access=shared"] } };
  fs.writeFileSync(file + ".tmp", JSON.stringify(config, null, 2) + "\n");
  fs.renameSync(file + ".tmp", file);
' "$CONFIG" "$RUNSC"

[[ -f "$PIDFILE" ]] || {
  echo "no $PIDFILE: cannot tell the engine to reload $CONFIG (restart dockerd yourself)" >&2
  exit 1
}
kill -HUP "$(cat "$PIDFILE")"
for _ in $(seq 1 50); do
  if registered; then
    echo "registered runsc with the engine ($RUNSC --platform=ptrace --network=host --file-access=shared)"
    exit 0
  fi
  sleep 0.2
done
echo "the engine did not take the runsc runtime from $CONFIG; its log says why" >&2
exit 1
