#!/usr/bin/env bash
# The two commands a newcomer needs, on a fresh Debian/Ubuntu machine with Go:
#   ./dev.sh demo [demo flags]   run the demo; it starts its own redis-server
#   ./dev.sh test                vet, then run every test against real redis-server
#                                processes (plain, then under the race detector)
# Both install redis-server with apt-get when it is missing; test also installs
# Chromium, which renders the demo's HTML report headless.
set -euo pipefail
cd "$(dirname "$0")"

# ensure CMD PACKAGE: install PACKAGE with apt-get when CMD is missing.
ensure() {
	command -v "$1" >/dev/null 2>&1 && return
	echo "dev.sh: $1 not found; installing $2 with apt-get" >&2
	local sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$2" >/dev/null
	command -v "$1" >/dev/null 2>&1 || { echo "dev.sh: $1 still missing" >&2; exit 1; }
}

case "${1:-}" in
demo)
	shift
	ensure redis-server redis-server
	exec go run ./cmd/demo "$@"
	;;
test)
	ensure redis-server redis-server
	# The demo report's test opens the page in headless Chromium.
	ensure chromium chromium
	go vet ./...
	# Tests start their own redis-server processes on free loopback ports.
	# They mostly wait (leases, wait times, fault injection), so more of them
	# run at once than there are CPUs; their tolerances allow for it.
	go test -count=1 -parallel 4 ./...
	go test -count=1 -parallel 4 -race ./...
	# The benchmark module (peers redsync and bsm/redislock): a short smoke
	# run of every contender proves the harness still works.
	if [ -f tests/bench/go.mod ]; then
		(cd tests/bench && go vet ./... && go test -count=1 ./...)
	fi
	;;
*)
	echo "usage: ./dev.sh demo [flags] | ./dev.sh test" >&2
	exit 2
	;;
esac
