package tests

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// 16 owners in 4 processes, 100 non-atomic read-modify-writes each under
// the lock: no update is lost, no two critical sections overlap, tokens
// strictly increase.
func TestMutualExclusionAcrossProcesses(t *testing.T) {
	eachDeploymentInTurn(t, func(t *testing.T, d *deployment) {
		c := d.client(t)
		ctx := ctxFor(t, 3*time.Minute)
		env := with(d.workerEnv(), map[string]string{
			"LOCK_NAME": "bank", "COUNTER_KEY": "bank:counter", "OWNERS": "4", "ITERS": "100",
		})
		workers := make([]*worker, 4)
		for i := range workers {
			workers[i] = spawn(t, "mutex", env)
		}
		var all []section
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, line := range w.wait(t, 3*time.Minute) {
					raw, ok := strings.CutPrefix(line, "SECTION ")
					if !ok {
						continue
					}
					var s section
					require.NoError(t, json.Unmarshal([]byte(raw), &s))
					mu.Lock()
					all = append(all, s)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		n, err := c.Get(ctx, "bank:counter").Result()
		require.NoError(t, err)
		assert.Equal(t, "1600", n, "no update lost")
		require.Len(t, all, 1600)
		assertExclusive(t, all)
		owners := map[string]bool{}
		procs := map[int]bool{}
		for _, s := range all {
			owners[s.Owner], procs[s.Proc] = true, true
		}
		assert.Len(t, owners, 1600, "every acquisition is an owner of its own")
		assert.Len(t, procs, 4)
		t.Logf("1600 exclusive critical sections by %d owners in %d processes; tokens %s..%s",
			len(owners), len(procs), strconv.FormatInt(all[0].Token, 10), strconv.FormatInt(all[len(all)-1].Token, 10))
	})
}

// Owners in several processes get turns: no process keeps the lock for long
// runs of consecutive acquisitions while the others wait. (A process hands a
// released lock to its own next waiter at most 8 times in a row, then
// releases it publicly and stands aside if other processes heard that.)
func TestProcessesTakeTurns(t *testing.T) {
	eachDeploymentInTurn(t, func(t *testing.T, d *deployment) {
		env := with(d.workerEnv(), map[string]string{
			"LOCK_NAME": "turns", "COUNTER_KEY": "turns:counter", "OWNERS": "2", "ITERS": "150",
		})
		workers := []*worker{spawn(t, "mutex", env), spawn(t, "mutex", env), spawn(t, "mutex", env)}
		var all []section
		for _, w := range workers {
			for _, line := range w.wait(t, 2*time.Minute) {
				if raw, ok := strings.CutPrefix(line, "SECTION "); ok {
					var s section
					require.NoError(t, json.Unmarshal([]byte(raw), &s))
					all = append(all, s)
				}
			}
		}
		require.Len(t, all, 900)
		assertExclusive(t, all)
		slices.SortFunc(all, func(x, y section) int { return cmp.Compare(x.Start, y.Start) })
		// Only while every process contends: from when each has begun (on
		// a loaded machine a process may take seconds to start, and the
		// first holds the lock alone meanwhile) until one has no work left
		// (at the end, the last holds it alone by necessity).
		firstStart, lastStart := map[int]int64{}, map[int]int64{}
		for _, s := range all {
			if _, ok := firstStart[s.Proc]; !ok {
				firstStart[s.Proc] = s.Start
			}
			lastStart[s.Proc] = s.Start
		}
		from := slices.Max(slices.Collect(maps.Values(firstStart)))
		until := slices.Min(slices.Collect(maps.Values(lastStart)))
		longest, run := 0, 0
		for i, s := range all {
			if s.Start < from {
				continue
			}
			if s.Start > until {
				break
			}
			if i > 0 && all[i-1].Proc == s.Proc && all[i-1].Start >= from {
				run++
			} else {
				run = 1
			}
			longest = max(longest, run)
		}
		t.Logf("longest run of one process while all contended: %d acquisitions", longest)
		assert.LessOrEqual(t, longest, 27, "a process kept the lock for %d acquisitions in a row", longest)
	})
}
