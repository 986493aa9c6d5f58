#!/usr/bin/env bash
# The two commands a newcomer needs, on a fresh Debian/Ubuntu machine with Go:
#   ./dev.sh demo [demo flags]   run the demo; it starts its own redis-server
#   ./dev.sh test                vet, then run every test against real redis-server
#                                processes (plain, then under the race detector)
#   ./dev.sh scale [flags]       one runtime holding 100k names, then 1M names
#                                touched one after another: prints figures
#                                (flags: go run ./tests/scale -h)
#   ./dev.sh chaos [duration]    the randomized fault-injection run (default 10m),
#                                seed printed; CHAOS_SEED=n replays one
#   ./dev.sh soak [duration]     the same, judged as a soak (heap, goroutines,
#                                Redis memory must not keep growing)
#   ./dev.sh sim [duration] [seed]  the seeded simulation of the lock runtime
#                                (tests/sim, default 60s over the CI seeds, or
#                                one seed); SIM_OPS, SIM_FAULTS, SIM_KNOWN,
#                                SIM_SHRINK narrow it (tests/sim/sim_test.go)
#   ./dev.sh sim-mutants         re-enable each defect of the mutant list below
#                                (build tag actorlock_mutants) and check the
#                                simulation catches it within 60s, after a
#                                baseline run without any that must pass
# They install redis-server with apt-get when it is missing; test also
# installs Chromium, which renders the demo's HTML report headless.
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
	# go run prints nothing while it builds: say why the first run is quiet.
	echo "dev.sh: building the demo; the first build downloads and compiles the dependencies and takes a few minutes on a small machine (about 4 minutes on 2 cores), later ones seconds" >&2
	exec go run ./cmd/demo "$@"
	;;
test)
	ensure redis-server redis-server
	# The demo report's test opens the page in headless Chromium.
	ensure chromium chromium
	unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
	if [ -n "$unformatted" ]; then
		echo "dev.sh: gofmt would change: $unformatted" >&2
		exit 1
	fi
	go vet ./...
	# The linter, at a pinned version from the module proxy (staticcheck.conf).
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	# Tests start their own redis-server processes on free loopback ports.
	# They mostly wait (leases, wait times, fault injection), so more of them
	# run at once than there are CPUs; their tolerances allow for it.
	# This includes the README's quickstart, built and run from README.md
	# (tests/readme_test.go), and every primitive in FIPS 140-only mode
	# (tests/fips_test.go re-runs itself with GODEBUG=fips140=only).
	go test -count=1 -parallel 4 ./...
	go test -count=1 -parallel 4 -race ./...
	# The examples once more in FIPS 140-only mode, where Go's SHA-1 panics.
	GODEBUG=fips140=only go test -count=1 -run '^Example' .
	# Whether actorlock works on miniredis (it does not: tests/miniredis
	# says why); a module of its own, so users do not inherit miniredis.
	(cd tests/miniredis && go vet ./... && go test -count=1 ./...)
	# A short fuzzing pass over what a remote peer can send (the seeds in
	# testdata/fuzz run in every go test above). Budgets are counts (about
	# 10 s and 25 s here), not durations: Go 1.26's fuzz coordinator can
	# fail a clean run with "context deadline exceeded" when a -fuzztime
	# duration ends while a worker is mid-input (go.dev/issue/75804, fixed
	# in Go 1.27); a count has no deadline to race.
	go test -count=1 -timeout 10m -run '^$' -fuzz '^FuzzEnvelopeFilter$' -fuzztime 60000x ./remoting/
	go test -count=1 -timeout 10m -run '^$' -fuzz '^FuzzRequests$' -fuzztime 60000x ./tests/
	# The benchmark module (peers redsync and bsm/redislock): a short smoke
	# run of every contender proves the harness still works.
	if [ -f tests/bench/go.mod ]; then
		(cd tests/bench && go vet ./... && go test -count=1 ./...)
	fi
	;;
scale)
	shift
	ensure redis-server redis-server
	# Built without -race: it measures speed and memory.
	go build -o "${TMPDIR:-/tmp}/actorlock-scale" ./tests/scale
	exec "${TMPDIR:-/tmp}/actorlock-scale" "$@"
	;;
chaos)
	ensure redis-server redis-server
	seed="${CHAOS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
	echo "dev.sh chaos: seed $seed, duration ${2:-10m}" >&2
	CHAOS_SEED="$seed" CHAOS_DURATION="${2:-10m}" \
		exec go test -count=1 -timeout 0 -v -run '^TestChaos$' ./tests/chaos/
	;;
sim)
	ensure redis-server redis-server
	SIM_DURATION="${2:-${SIM_DURATION:-60s}}" SIM_SEED="${3:-${SIM_SEED:-}}" \
		exec go test -count=1 -timeout 0 -v -run '^TestSim$' ./tests/sim/
	;;
sim-mutants)
	ensure redis-server redis-server
	# The mutants, by ACTORLOCK_MUTANT number (internal/mutant): issue 23's
	# seven (1-7), then issue 31's defects A-F (8-13), issue 33's (16,
	# 18-20), the simulation's findings (14, 15, 17, 21, 22) and red-team
	# findings RT9-1 (23) and RT10-1 (24). The one list to extend;
	# SIM_MUTANTS="3 9" runs some of them. Defect 1 (a hand-off during a
	# give-back) runs with 21 too: finding Z's fix (a give-back acts only
	# while the fencing counter holds its token) masks it wherever the
	# give-back's token is known, so alone it is all but harmless, and a
	# run catches it only now and then. Defect C (10) likewise: a give-back
	# checks the old hold's token (the fencing counter, a read's key),
	# which the fresh hold it would delete has moved, so it runs with 21.
	all_mutants="1+21 2 3 4 5 6 7 8 9 10+21 11 12 13 14 15 16 17 18 19 20 21 22 23 24"
	mutants="${SIM_MUTANTS:-$all_mutants}"
	duration="${SIM_MUTANT_DURATION:-60s}"
	bin="${TMPDIR:-/tmp}/actorlock-sim-mutants"
	# Each mutant must make the simulation fail (PASS = caught) within 60s.
	go test -c -o "$bin" -tags actorlock_mutants ./tests/sim/
	# The library without a mutant must pass the same run, or a mutant
	# "caught" proves nothing.
	baseline=ok
	if ! (cd tests/sim && ACTORLOCK_MUTANT=0 SIM_DURATION="$duration" SIM_SHRINK=0 \
		"$bin" -test.count=1 -test.timeout=10m -test.v -test.run '^TestSim$' >"${TMPDIR:-/tmp}/actorlock-sim-mutant-0.log" 2>&1); then
		what=$(sed -n 's/^ *VIOLATION \(.*\) after [0-9.]*s on .*/\1/p' "${TMPDIR:-/tmp}/actorlock-sim-mutant-0.log" | tail -1) || true
		echo "sim-mutants: the run fails without any mutant (ACTORLOCK_MUTANT=0${what:+: $what}): the results below prove nothing" >&2
		baseline=failed
	fi
	caught=0
	total=0
	for n in $mutants; do
		total=$((total + 1))
		out=$(cd tests/sim && ACTORLOCK_MUTANT=$n SIM_DURATION="$duration" SIM_SHRINK=0 \
			"$bin" -test.count=1 -test.timeout=10m -test.v -test.run '^TestSim$' 2>&1) && rc=0 || rc=$?
		at=$(printf '%s\n' "$out" | sed -n 's/.*sim: first violation after \([0-9.]*s\) of simulation.*/\1/p' | head -1) || true
		# The check that caught it: the invariant of the violation that
		# failed the run, printed last (violations counted as known shapes,
		# SIM_KNOWN, are printed before it), and the shape it has, if any.
		# (|| true: a pipeline that matches nothing must not end the loop
		# under set -e -o pipefail.)
		what=$(printf '%s\n' "$out" | sed -n 's/^ *VIOLATION \(.*\) after [0-9.]*s on .*/\1/p' | tail -1) || true
		shape=$(printf '%s\n' "$out" | grep '^ *VIOLATION' | tail -1 | sed -n 's/.*\[shape of \(.*\)\].*/\1/p') || true
		printf '%s\n' "$out" >"${TMPDIR:-/tmp}/actorlock-sim-mutant-$n.log"
		if [ "$rc" -ne 0 ] && [ -n "$at" ]; then
			echo "mutant $n: PASS (caught after $at by: $what${shape:+; shape of $shape})"
			caught=$((caught + 1))
		elif [ "$rc" -ne 0 ]; then
			echo "mutant $n: FAIL (the run broke without a violation)"
			printf '%s\n' "$out" | tail -20
		else
			echo "mutant $n: FAIL (not caught)"
		fi
	done
	echo "sim-mutants: $caught of $total caught (baseline without a mutant: $baseline); each run's output: ${TMPDIR:-/tmp}/actorlock-sim-mutant-N.log (0: the baseline)"
	[ "$caught" -eq "$total" ] && [ "$baseline" = ok ]
	;;
soak)
	# The chaos run, reported as a soak: heap and goroutines of every worker
	# and Redis's memory over time; it fails if any keeps growing.
	exec "$0" chaos "${2:-10m}"
	;;
*)
	echo "usage: ./dev.sh demo [flags] | ./dev.sh test | ./dev.sh scale [flags] | ./dev.sh chaos|soak [duration] | ./dev.sh sim [duration] [seed] | ./dev.sh sim-mutants" >&2
	exit 2
	;;
esac
