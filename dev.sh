#!/usr/bin/env bash
# The two commands a newcomer needs, on a fresh Debian/Ubuntu machine with Go:
#   ./dev.sh demo [demo flags]   run the demo; it starts its own redis-server
#   ./dev.sh test                vet, then run every test against real redis-server
#                                processes (plain, then under the race detector)
#   ./dev.sh chaos [duration]    the randomized fault-injection run (default 10m),
#                                seed printed; CHAOS_SEED=n replays one
#   ./dev.sh soak [duration]     the same, judged as a soak (heap, goroutines,
#                                Redis memory must not keep growing)
# Both install redis-server with apt-get when it is missing.
set -euo pipefail
cd "$(dirname "$0")"

ensure_redis() {
	command -v redis-server >/dev/null 2>&1 && return
	echo "dev.sh: redis-server not found; installing it with apt-get" >&2
	local sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
	command -v redis-server >/dev/null 2>&1 || { echo "dev.sh: redis-server still missing" >&2; exit 1; }
}

case "${1:-}" in
demo)
	shift
	ensure_redis
	exec go run ./cmd/demo "$@"
	;;
test)
	ensure_redis
	go vet ./...
	# Tests start their own redis-server processes on free loopback ports.
	# They mostly wait (leases, wait times, fault injection), so more of them
	# run at once than there are CPUs; their tolerances allow for it.
	go test -count=1 -parallel 4 ./...
	go test -count=1 -parallel 4 -race ./...
	# A short fuzzing pass over what a remote peer can send (the seeds in
	# testdata/fuzz run in every go test above).
	go test -count=1 -run '^$' -fuzz '^FuzzEnvelopeFilter$' -fuzztime 15s .
	go test -count=1 -run '^$' -fuzz '^FuzzRequests$' -fuzztime 30s ./tests/
	# The benchmark module (peers redsync and bsm/redislock): a short smoke
	# run of every contender proves the harness still works.
	if [ -f tests/bench/go.mod ]; then
		(cd tests/bench && go vet ./... && go test -count=1 ./...)
	fi
	;;
chaos)
	ensure_redis
	seed="${CHAOS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
	echo "dev.sh chaos: seed $seed, duration ${2:-10m}" >&2
	CHAOS_SEED="$seed" CHAOS_DURATION="${2:-10m}" \
		exec go test -count=1 -timeout 0 -v -run '^TestChaos$' ./tests/chaos/
	;;
soak)
	# The chaos run, reported as a soak: heap and goroutines of every worker
	# and Redis's memory over time; it fails if any keeps growing.
	exec "$0" chaos "${2:-10m}"
	;;
*)
	echo "usage: ./dev.sh demo [flags] | ./dev.sh test | ./dev.sh chaos|soak [duration]" >&2
	exit 2
	;;
esac
