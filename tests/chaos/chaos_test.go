package chaos

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The bounds every run is held to (lease 2 s, wait 3 s). WaitSlack and
// DoneSlack allow for a loaded 2-core machine under the race detector;
// Stall is the longest critical section of the workload (3 leases, which
// may be under way when a fault ends) plus a lease (a killed or cut-off
// holder's key expiring).
func runBounds(lease, wait time.Duration) bounds {
	return bounds{Lease: lease, Wait: wait, WaitSlack: 300 * time.Millisecond, DoneSlack: 40 * time.Millisecond,
		Stall: 4 * lease}
}

// runChaos runs procs×clients workers for d, injecting faults of the given
// kinds at random (seeded) one at a time, then checks the history.
// With count > 0 it injects that many faults and ends once grants resumed
// after the last, whatever d says.
func runChaos(t *testing.T, seed uint64, d time.Duration, kinds []string, procs, names, count int) *verdict {
	const lease, wait = 2 * time.Second, 3 * time.Second
	h := newHarness(t, config{seed: seed, procs: procs, clients: 2, names: names, lease: lease, wait: wait,
		failover: slices.Contains(kinds, "sentinel-failover")})
	t.Logf("seed %d, %v, kinds %v", seed, d, kinds)
	stopMem := make(chan struct{})
	mem, keys, memDone := redisMemory(h.srv.Addr, stopMem)
	end := time.Now().Add(d)
	time.Sleep(1500 * time.Millisecond) // let the workers start
	missed := 0
	for {
		if count > 0 && len(h.faults) >= count || count == 0 && !time.Now().Add(3*time.Second).Before(end) {
			break
		}
		if missed > 10 {
			t.Fatalf("could not place a fault of %v 10 times", kinds)
		}
		in := injectorByKind(kinds[h.rng.IntN(len(kinds))])
		if f, ok := in.run(h); ok {
			h.record(f)
		} else {
			missed++
		}
		if count == 0 || len(h.faults) < count {
			time.Sleep(time.Duration(500+h.rng.IntN(1500)) * time.Millisecond)
		}
	}
	if rest := time.Until(end); count == 0 && rest > 0 {
		time.Sleep(rest)
	}
	// Let grants resume after the last fault, so its stall is measured.
	if len(h.faults) > 0 {
		h.waitGrantAfter(h.faults[len(h.faults)-1].End, runBounds(lease, wait).Stall+time.Second, nil)
	}
	h.stopAll()
	close(stopMem)
	memDone()
	evs := h.history()
	v := check(evs, h.faults, h.killed, runBounds(lease, wait))
	if os.Getenv("CHAOS_DEBUG") != "" {
		for _, f := range h.faults {
			t.Logf("fault %s proc %d [%d, %d]", f.Kind, f.Proc, f.Start, f.End)
			for _, e := range evs {
				if (f.Proc < 0 || e.P == f.Proc) && e.T > f.Start-int64(3*time.Second) && e.T < f.End+int64(time.Second) {
					t.Logf("  %+v  (%+.3fs)", e, float64(e.T-f.Start)/1e9)
				}
			}
		}
	}
	t.Logf("seed %d: %v (faults not placed: %d)", seed, v, missed)
	for _, p := range v.Problems {
		t.Error(p)
	}
	// The soak: nothing may grow without bound. Judged on runs of 2 min or
	// more (shorter ones have no steady state to compare); always reported.
	grown := checkGrowth(append(workerSeries(evs),
		series{"redis used_memory", *mem, 1 << 20}, series{"redis keys", *keys, 50}), t.Logf)
	if d >= 2*time.Minute {
		for _, g := range grown {
			t.Error("grows without bound:", g)
		}
	}
	require.NotZero(t, v.Grants, "no grants at all")
	return v
}

func envInt(k string, def uint64) uint64 {
	if n, err := strconv.ParseUint(os.Getenv(k), 10, 64); err == nil {
		return n
	}
	return def
}

func allKinds() []string {
	out := make([]string, 0, len(injectors))
	for _, in := range injectors {
		out = append(out, in.kind)
	}
	return out
}

// TestChaos is the randomized mixed run: CHAOS_SEED (default 1, the fixed
// CI seed) and CHAOS_DURATION (default 30s) select it, CHAOS_KINDS (comma-separated)
// restricts the faults; ./dev.sh chaos sets
// both.
func TestChaos(t *testing.T) {
	d := 30 * time.Second
	if s := os.Getenv("CHAOS_DURATION"); s != "" {
		var err error
		d, err = time.ParseDuration(s)
		require.NoError(t, err)
	}
	kinds := allKinds()
	if k := os.Getenv("CHAOS_KINDS"); k != "" {
		kinds = strings.Split(k, ",")
	}
	runChaos(t, envInt("CHAOS_SEED", 1), d, kinds, 4, 3, 0)
}

// TestFault injects each kind of fault on its own into 3 workers and
// checks its expected outcome (the injector's expect) besides the
// guarantees every run is held to.
func TestFault(t *testing.T) {
	for _, in := range injectors {
		t.Run(in.kind, func(t *testing.T) {
			t.Parallel() // each has its own servers and workers; they mostly wait
			t.Log("expected:", in.expect)
			// A fault whose check needs a takeover runs on one name:
			// every other client is waiting for it. One whose check
			// needs grants keeps 3 names, which give them sooner.
			names := 3
			if faultChecks[in.kind] != nil && !checkNeedsGrants[in.kind] {
				names = 1
			}
			v := runChaos(t, envInt("CHAOS_SEED", 1), 0, []string{in.kind}, 3, names, 1)
			if c := faultChecks[in.kind]; c != nil {
				c(t, v)
			}
		})
	}
}
