package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
)

// counterCheck is what the record and Redis say about one counter.
type counterCheck struct {
	counter    int
	inRedis    int64
	recorded   int // critical sections on it
	overlaps   int // sections that started before an earlier one ended
	inversions int // sections whose token was not above the previous one's
}

type verdict struct {
	counters []counterCheck
	perProc  map[int]int // critical sections by process
	owners   int
	ranFor   time.Duration
	timeouts int
	errs     []error
}

// judge checks the record of the run against the counters in Redis.
func judge(ctx context.Context, rdb redis.UniversalClient, t *tally, ranFor time.Duration) (verdict, error) {
	sections, timeouts, errs := t.result()
	v := verdict{ranFor: ranFor, timeouts: timeouts, errs: errs, perProc: map[int]int{}}
	owners := map[[2]int]bool{}
	for c, ss := range sections {
		n, err := rdb.Get(ctx, counterKey(c)).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return v, fmt.Errorf("read counter %d: %w", c, err)
		}
		cc := checkSections(ss)
		cc.counter, cc.inRedis = c, n
		v.counters = append(v.counters, cc)
		for _, s := range ss {
			v.perProc[s.Proc]++
			owners[[2]int{s.Proc, s.Owner}] = true
		}
	}
	v.owners = len(owners)
	return v, nil
}

// checkSections counts overlaps and token inversions in one counter's
// sections, sorted by start.
func checkSections(ss []section) counterCheck {
	cc := counterCheck{recorded: len(ss)}
	var lastEnd int64
	for i, s := range ss {
		if i > 0 {
			// Against the latest end so far, not just the previous
			// section's: a long section can cover several short ones.
			if s.Start < lastEnd {
				cc.overlaps++
			}
			if s.Token <= ss[i-1].Token {
				cc.inversions++
			}
		}
		lastEnd = max(lastEnd, s.End)
	}
	return cc
}

func (v verdict) totals() (inRedis int64, recorded, overlaps, inversions int) {
	for _, c := range v.counters {
		inRedis += c.inRedis
		recorded += c.recorded
		overlaps += c.overlaps
		inversions += c.inversions
	}
	return
}

func (v verdict) countsMatch() bool {
	for _, c := range v.counters {
		if c.inRedis != int64(c.recorded) {
			return false
		}
	}
	return true
}

func (v verdict) ok() bool {
	_, _, overlaps, inversions := v.totals()
	return v.countsMatch() && overlaps == 0 && inversions == 0 && len(v.errs) == 0
}

// perProcText shows how the sections split between processes, which shows
// whether other processes got their turn.
func (v verdict) perProcText() string {
	procs := slices.Sorted(maps.Keys(v.perProc))
	parts := make([]string, len(procs))
	for i, p := range procs {
		parts[i] = fmt.Sprintf("process %d: %d", p, v.perProc[p])
	}
	return strings.Join(parts, ", ")
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// print writes the verdict table.
func (v verdict) print(w io.Writer) {
	inRedis, recorded, overlaps, inversions := v.totals()
	fmt.Fprintf(w, "\nverdict after %v: %d critical sections by %d owners in %d processes (%s)\n",
		v.ranFor.Round(time.Millisecond), recorded, v.owners, len(v.perProc), v.perProcText())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "counter\tin redis\trecorded\toverlaps\ttoken inversions")
	for _, c := range v.counters {
		fmt.Fprintf(tw, "account:%d\t%d\t%d\t%d\t%d\n", c.counter, c.inRedis, c.recorded, c.overlaps, c.inversions)
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\n", inRedis, recorded, overlaps, inversions)
	_ = tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "check: every counter in Redis = its recorded acquisitions\t%s\t%d in Redis, %d recorded, %d lost\n",
		passFail(v.countsMatch()), inRedis, recorded, int64(recorded)-inRedis)
	fmt.Fprintf(tw, "check: no overlapping critical sections on a counter\t%s\t%d overlaps\n", passFail(overlaps == 0), overlaps)
	fmt.Fprintf(tw, "check: fencing tokens strictly increase per counter\t%s\t%d inversions\n", passFail(inversions == 0), inversions)
	fmt.Fprintf(tw, "check: no errors\t%s\t%d errors, %d acquire timeouts (not errors)\n", passFail(len(v.errs) == 0), len(v.errs), v.timeouts)
	_ = tw.Flush()
	for _, err := range v.errs {
		fmt.Fprintln(w, "  error:", err)
	}
	fmt.Fprintln(w, "VERDICT:", passFail(v.ok()))
}
