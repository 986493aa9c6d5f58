package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/internal/redisserver"
)

func init() {
	// Registered here so that child processes (this test binary) find it.
	registry["nolock"] = openNoLock
}

func TestMain(m *testing.M) {
	if _, child, _ := childJobFromEnv(); child {
		os.Exit(childMain())
	}
	if _, err := redisserver.Binary(); err != nil {
		fmt.Fprintln(os.Stderr, "the benchmark's tests need redis-server:", err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// smokeOptions runs every scenario briefly.
func smokeOptions(contenders ...string) options {
	o := defaultOptions()
	o.Contenders = contenders
	o.Duration = 300 * time.Millisecond
	o.ContendedDuration = 300 * time.Millisecond
	o.StartDelay = 700 * time.Millisecond
	return o
}

// TestSmoke runs every contender in every scenario for 300 ms: each must
// acquire, without errors and without overlapping critical sections, and
// the command counts must have been taken.
func TestSmoke(t *testing.T) {
	res, err := runBench(smokeOptions(defaultContenders...), t.Output(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []string{"a1", "a32"} {
		rows := res.Uncontended[sc]
		if len(rows) != len(defaultContenders) {
			t.Fatalf("%s: %d rows, want %d", sc, len(rows), len(defaultContenders))
		}
		for _, r := range rows {
			if r.Ops == 0 || r.Errors != 0 || r.P50 <= 0 || r.LockP50 <= 0 || r.LockP50 > r.P50 {
				t.Errorf("%s %s: %d ops, %d errors (%s), p50 %v, lock p50 %v", sc, r.Contender, r.Ops, r.Errors, r.FirstError, r.P50, r.LockP50)
			}
		}
	}
	for _, sc := range []string{"b", "c"} {
		rows := res.Contended[sc]
		if len(rows) != len(defaultContenders)-1 { // evalsha is no lock
			t.Fatalf("%s: %d rows, want %d", sc, len(rows), len(defaultContenders)-1)
		}
		for _, r := range rows {
			if r.Acquisitions == 0 || r.Errors != 0 || r.Overlaps != 0 {
				t.Errorf("%s %s: %d acquisitions, %d errors (%s), %d overlaps",
					sc, r.Contender, r.Acquisitions, r.Errors, r.FirstError, r.Overlaps)
			}
			if r.ClientCmds < int64(r.Acquisitions) || r.ServerCmds < r.ClientCmds {
				t.Errorf("%s %s: %d acquisitions but %d client / %d server commands",
					sc, r.Contender, r.Acquisitions, r.ClientCmds, r.ServerCmds)
			}
		}
	}
}

// TestDetectsOverlap proves the overlap check can fail: a "lock" that does
// not exclude anyone must be caught, in one process and across processes.
func TestDetectsOverlap(t *testing.T) {
	o := smokeOptions("nolock")
	o.Scenarios = []string{"b", "c"}
	res, err := runBench(o, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range o.Scenarios {
		r := res.Contended[sc][0]
		if r.Acquisitions == 0 || r.Overlaps == 0 {
			t.Errorf("%s: %d acquisitions, %d overlaps: the broken lock went unnoticed", sc, r.Acquisitions, r.Overlaps)
		}
	}
}

// noLock does not lock at all; it sends one PING per call so that it talks
// to Redis like a real contender.
type noLock struct{ rdb *redis.Client }

func openNoLock(rdb *redis.Client) (impl, error) { return &noLock{rdb: rdb}, nil }

func (n *noLock) newLocker(string) locker          { return n }
func (n *noLock) close(context.Context) error      { return nil }
func (n *noLock) lock(ctx context.Context) error   { return n.rdb.Ping(ctx).Err() }
func (n *noLock) unlock(ctx context.Context) error { return n.rdb.Ping(ctx).Err() }

func TestAnalyzeContended(t *testing.T) {
	// Goroutine 0 acquires twice in a row (one handover is not counted),
	// then 1, then 2; goroutine 3 never acquires. The last record starts
	// before the one before it ends.
	// Goroutines 0 and 1 run in process 0, 2 and 3 in process 1.
	recs := []record{
		{P: 1, G: 2, Call: 100, Acq: 400, Rel: 450},
		{P: 0, G: 0, Call: 0, Acq: 10, Rel: 100},
		{P: 0, G: 0, Call: 100, Acq: 110, Rel: 200},
		{P: 0, G: 1, Call: 50, Acq: 250, Rel: 300},
		{P: 0, G: 0, Call: 440, Acq: 445, Rel: 460},
	}
	delta := cmdStats{"evalsha": 10, "subscribe": 2, "info": 1, "config|resetstat": 1}
	s := analyzeContended("x", runResult{Records: recs, Commands: 8}, time.Second, 4, 2, delta)
	if s.Acquisitions != 5 || s.AcqPerSec != 5 {
		t.Errorf("acquisitions %d, %v/s", s.Acquisitions, s.AcqPerSec)
	}
	if s.Handovers != 3 {
		t.Errorf("handovers %d, want 3", s.Handovers)
	}
	// Waits of the handovers: 250-50=200, 400-100=300, 445-440=5.
	if s.WaitP50 != 200 || s.WaitP99 != 300 || s.WaitMax != 300 {
		t.Errorf("waits p50 %v p99 %v max %v", s.WaitP50, s.WaitP99, s.WaitMax)
	}
	if s.MinPerG != 0 || s.MaxPerG != 3 || s.Fairness != 0 {
		t.Errorf("per goroutine %d-%d, fairness %v", s.MinPerG, s.MaxPerG, s.Fairness)
	}
	if s.MinPerProc != 1 || s.MaxPerProc != 4 || s.LongestProcRun != 3 {
		t.Errorf("per process %d-%d, longest run %d", s.MinPerProc, s.MaxPerProc, s.LongestProcRun)
	}
	if s.Overlaps != 1 {
		t.Errorf("overlaps %d, want 1", s.Overlaps)
	}
	if s.ClientCmds != 10 || s.ServerCmds != 12 {
		t.Errorf("commands client %d server %d, want 10 and 12", s.ClientCmds, s.ServerCmds)
	}
}

func TestParseCmdStats(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_set:calls=3,usec=9,usec_per_call=3.00,rejected_calls=1,failed_calls=0\r\n" +
		"cmdstat_config|resetstat:calls=1,usec=5,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=2,usec=5,usec_per_call=2.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_unsubscribe:calls=4,usec=5,usec_per_call=1.25,rejected_calls=0,failed_calls=0\r\n"
	s, err := parseCmdStats(info)
	if err != nil {
		t.Fatal(err)
	}
	if s["set"] != 4 || s["config|resetstat"] != 1 || s["unsubscribe"] != 4 {
		t.Errorf("parsed %v", s)
	}
	if s.total() != 8 || s.pubsub() != 4 {
		t.Errorf("total %d pubsub %d, want 8 and 4", s.total(), s.pubsub())
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if p := percentile(d, 0.5); p != 50 {
		t.Errorf("p50 %v", p)
	}
	if p := percentile(d, 0.99); p != 99 {
		t.Errorf("p99 %v", p)
	}
	if p := percentile(d[:1], 0.99); p != 1 {
		t.Errorf("p99 of one %v", p)
	}
	if p := percentile(nil, 0.5); p != 0 {
		t.Errorf("p50 of none %v", p)
	}
}

// The README's flag table names the contenders that run by default, all of
// them, in their order (it once named four of five).
func TestREADMENamesTheDefaultContenders(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := "| `-contenders` | `" + strings.Join(defaultContenders, ",") + "` |"
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md's flag table lacks %q", want)
	}
}
