package tests

import (
	"encoding/json"
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
	srv := startRedis(t)
	c := client(t, srv.Addr)
	ctx := ctxFor(t, 3*time.Minute)
	env := map[string]string{
		"REDIS_ADDR": srv.Addr, "LOCK_NAME": "bank", "COUNTER_KEY": "bank:counter",
		"OWNERS": "4", "ITERS": "100",
	}
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
	assert.Len(t, owners, 16)
	assert.Len(t, procs, 4)
	t.Logf("1600 exclusive critical sections by %d owners in %d processes; tokens %s..%s",
		len(owners), len(procs), strconv.FormatInt(all[0].Token, 10), strconv.FormatInt(all[len(all)-1].Token, 10))
}
