package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// sample is one point of a resource series.
type sample struct {
	t int64
	v int64
}

// redisMemory samples the faulted Redis's used_memory and key count every
// 2 s until stop; samples while Redis is down are skipped.
func redisMemory(addr string, stop <-chan struct{}) (mem, keys *[]sample, wait func()) {
	mem, keys = &[]sample{}, &[]sample{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: time.Second})
		defer rdb.Close()
		tk := time.NewTicker(2 * time.Second)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			info, err := rdb.Info(ctx, "memory").Result()
			n, err2 := rdb.DBSize(ctx).Result()
			cancel()
			if err != nil || err2 != nil {
				continue
			}
			for _, line := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
					var m int64
					fmt.Sscan(v, &m)
					*mem = append(*mem, sample{now(), m})
				}
			}
			*keys = append(*keys, sample{now(), n})
		}
	}()
	return mem, keys, wg.Wait
}

// growth compares a series' median in its last third with its median in
// its middle third (the first third is warm-up): what grows without bound
// keeps climbing between the two, while a series that only fluctuates (keys
// that expire, a GC cycle) keeps its median.
func growth(s []sample) (mid, last int64, ok bool) {
	if len(s) < 9 {
		return 0, 0, false
	}
	n := len(s) / 3
	med := func(xs []sample) int64 {
		v := make([]int64, len(xs))
		for i, x := range xs {
			v[i] = x.v
		}
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		return v[len(v)/2]
	}
	return med(s[n : 2*n]), med(s[2*n:]), true
}

// series are the soak's resource series: per worker process (those that
// lived the whole run) heap and goroutines, and Redis memory and keys.
type series struct {
	name  string
	s     []sample
	slack int64 // absolute growth allowed on top of 25 %
}

func workerSeries(evs []event) []series {
	heap, gor := map[int][]sample{}, map[int][]sample{}
	for _, e := range evs {
		if e.K == "mem" {
			heap[e.P] = append(heap[e.P], sample{e.T, e.Val})
			gor[e.P] = append(gor[e.P], sample{e.T, e.Tok})
		}
	}
	var out []series
	for p := range heap {
		sort.Slice(heap[p], func(i, j int) bool { return heap[p][i].t < heap[p][j].t })
		sort.Slice(gor[p], func(i, j int) bool { return gor[p][i].t < gor[p][j].t })
		out = append(out, series{fmt.Sprintf("worker %d heap", p), heap[p], 1 << 20},
			series{fmt.Sprintf("worker %d goroutines", p), gor[p], 10})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// checkGrowth reports each series over time and returns the ones that grew
// between the middle and the last third by more than 25 % plus slack.
func checkGrowth(all []series, logf func(string, ...any)) []string {
	var bad []string
	for _, s := range all {
		mid, last, ok := growth(s.s)
		if !ok {
			continue
		}
		var pts []string
		step := max(1, len(s.s)/8)
		for i := 0; i < len(s.s); i += step {
			pts = append(pts, fmt.Sprint(s.s[i].v))
		}
		logf("%-24s over time: %s (median middle third %d, last third %d)", s.name, strings.Join(pts, " "), mid, last)
		if last > mid+mid/4+s.slack {
			bad = append(bad, fmt.Sprintf("%s grew from %d to %d", s.name, mid, last))
		}
	}
	return bad
}
