package chaos

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The bounds every run is held to (lease 2 s, wait 3 s). WaitSlack and
// DoneSlack allow for a loaded 2-core machine under the race detector;
// Stall is a lease (a killed holder's key expiring) plus a wait.
func runBounds(lease, wait time.Duration) bounds {
	return bounds{Lease: lease, Wait: wait, WaitSlack: 300 * time.Millisecond, DoneSlack: 20 * time.Millisecond,
		Stall: lease + wait}
}

// runChaos runs procs×clients workers for d, injecting faults of the given
// kinds at random (seeded) one at a time, then checks the history.
func runChaos(t *testing.T, seed uint64, d time.Duration, kinds []string, procs int) *verdict {
	const lease, wait = 2 * time.Second, 3 * time.Second
	h := newHarness(t, config{seed: seed, procs: procs, clients: 2, names: 2, lease: lease, wait: wait})
	t.Logf("seed %d, %v, kinds %v", seed, d, kinds)
	end := time.Now().Add(d)
	time.Sleep(1500 * time.Millisecond) // let the workers start
	missed := 0
	for time.Now().Add(3*time.Second).Before(end) || len(h.faults) == 0 {
		in := injectorByKind(kinds[h.rng.IntN(len(kinds))])
		if f, ok := in.run(h); ok {
			h.record(f)
		} else {
			missed++
		}
		time.Sleep(time.Duration(500+h.rng.IntN(1500)) * time.Millisecond)
	}
	if rest := time.Until(end); rest > 0 {
		time.Sleep(rest)
	}
	// Let the last fault's stall be measured before stopping.
	time.Sleep(runBounds(lease, wait).Stall)
	h.stopAll()
	v := check(h.history(), h.faults, h.killed, runBounds(lease, wait))
	t.Logf("seed %d: %v (faults not placed: %d)", seed, v, missed)
	for _, p := range v.Problems {
		t.Error(p)
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
// CI seed) and CHAOS_DURATION (default 40s) select it; ./dev.sh chaos sets
// both.
func TestChaos(t *testing.T) {
	d := 40 * time.Second
	if s := os.Getenv("CHAOS_DURATION"); s != "" {
		var err error
		d, err = time.ParseDuration(s)
		require.NoError(t, err)
	}
	runChaos(t, envInt("CHAOS_SEED", 1), d, allKinds(), 4)
}
