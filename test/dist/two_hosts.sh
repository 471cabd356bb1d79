#!/usr/bin/env bash
# Two hosts on one machine: two network namespaces joined by a veth pair, one rank in each,
# talking over Open MPI's TCP transport only (no shared memory between them). mpirun runs in
# the first namespace and starts the second rank's daemon in the other through a launcher
# agent that stands in for ssh. Runs PROGRAM ARGS... as the job; exits 77 (skipped) where
# network namespaces cannot be made (no root, no CAP_NET_ADMIN, no iproute2).
#   two_hosts.sh MPIEXEC PROGRAM [ARGS...]
set -uo pipefail
mpiexec=$1
shift
if ! command -v ip > /dev/null; then
  echo "skipped: no ip command (apt-get install iproute2)"
  exit 77
fi
tag=lj$$
ns1=${tag}a ns2=${tag}b
tmp=$(mktemp -d)
cleanup() {
  ip netns del "$ns1" 2> /dev/null
  ip netns del "$ns2" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
# The two hosts; a step that the machine refuses (no CAP_NET_ADMIN, no veth) skips the test.
make_hosts() {
  ip netns add "$ns1" && ip netns add "$ns2" &&
    ip link add "${tag}x" type veth peer name "${tag}y" &&
    ip link set "${tag}x" netns "$ns1" && ip link set "${tag}y" netns "$ns2" &&
    ip -n "$ns1" addr add 10.213.0.1/24 dev "${tag}x" && ip -n "$ns2" addr add 10.213.0.2/24 dev "${tag}y" &&
    ip -n "$ns1" link set lo up && ip -n "$ns2" link set lo up &&
    ip -n "$ns1" link set "${tag}x" up && ip -n "$ns2" link set "${tag}y" up
}
if ! make_hosts 2> "$tmp/err"; then
  echo "skipped: cannot make two hosts of network namespaces: $(cat "$tmp/err")"
  exit 77
fi

# Open MPI's rsh launcher calls "AGENT HOST COMMAND...", as it would ssh.
cat > "$tmp/agent" << AGENT
#!/bin/sh
shift
exec ip netns exec $ns2 /bin/sh -c "\$*"
AGENT
chmod +x "$tmp/agent"
printf '10.213.0.1 slots=1\n10.213.0.2 slots=1\n' > "$tmp/hosts"
ip netns exec "$ns1" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  timeout 240 "$mpiexec" -np 2 --hostfile "$tmp/hosts" --map-by node --bind-to none \
  --mca plm_rsh_agent "$tmp/agent" --mca plm_rsh_no_tree_spawn 1 \
  --mca btl tcp,self --mca btl_tcp_if_include 10.213.0.0/24 --mca oob_tcp_if_include 10.213.0.0/24 \
  "$@"
code=$?
echo "two hosts over TCP: exit code $code"
exit $code
