package main

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// uncontendedStats summarises a run where no two goroutines share a lock.
type uncontendedStats struct {
	Contender string
	Ops       int
	OpsPerSec float64
	// P50 and P99 of the lock+unlock pair, from calling lock to unlock
	// returning.
	P50, P99 time.Duration
	// LockP50 is the median of the lock call alone.
	LockP50    time.Duration
	Errors     int64
	FirstError string
	// ServerCmds: every command Redis ran in the run (inside Lua scripts
	// included), less the harness's own.
	ServerCmds int64
	// ClientCPU and RedisCPU: CPU time of the run, per pair.
	ClientCPU, RedisCPU time.Duration
}

func (s uncontendedStats) serverPerPair() float64 { return perAcq(s.ServerCmds, s.Ops) }

// perOp divides a run's CPU time by its operations.
func perOp(d time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return d / time.Duration(n)
}

func analyzeUncontended(name string, res runResult, d time.Duration, delta cmdStats) uncontendedStats {
	lat := make([]time.Duration, len(res.Records))
	lock := make([]time.Duration, len(res.Records))
	for i, r := range res.Records {
		lat[i] = time.Duration(r.Done - r.Call)
		lock[i] = time.Duration(r.Acq - r.Call)
	}
	slices.Sort(lat)
	slices.Sort(lock)
	return uncontendedStats{
		Contender:  name,
		Ops:        len(res.Records),
		OpsPerSec:  float64(len(res.Records)) / d.Seconds(),
		P50:        percentile(lat, 0.50),
		P99:        percentile(lat, 0.99),
		LockP50:    percentile(lock, 0.50),
		Errors:     res.Errors,
		FirstError: res.FirstError,
		ServerCmds: delta.total(),
		ClientCPU:  perOp(res.ClientCPU, len(res.Records)),
		RedisCPU:   perOp(res.RedisCPU, len(res.Records)),
	}
}

// contendedStats summarises a run where every goroutine uses one lock.
type contendedStats struct {
	Contender    string
	Acquisitions int
	AcqPerSec    float64
	// Handovers counts acquisitions whose previous acquisition was by
	// another goroutine; the wait percentiles cover only those, so a holder
	// re-taking its own lock does not flatter them.
	Handovers        int
	WaitP50, WaitP99 time.Duration
	WaitMax          time.Duration
	// MinPerG and MaxPerG are the fewest and most acquisitions of one
	// goroutine; Fairness is MinPerG/MaxPerG.
	MinPerG, MaxPerG int
	Fairness         float64
	// Multi-process runs only: the fewest and most acquisitions of one
	// process, and the longest run of consecutive acquisitions by one
	// process (how long the others were shut out).
	MinPerProc, MaxPerProc, LongestProcRun int
	// ClientCmds: commands the contender's clients sent (hook counts plus
	// pub/sub commands from commandstats). ServerCmds: every command Redis
	// ran, those inside Lua scripts included, less the harness's own.
	ClientCmds, ServerCmds int64
	// Overlaps counts acquisitions that began before an earlier one ended:
	// it must be 0.
	Overlaps   int
	GaveUp     int64
	Errors     int64
	FirstError string
	Late       time.Duration
	ServerTop  []cmdCount // the commands Redis ran most
	// ClientCPU and RedisCPU: CPU time of the run, per acquisition.
	ClientCPU, RedisCPU time.Duration
}

type cmdCount struct {
	Name  string
	Calls int64
}

func (s contendedStats) clientPerAcq() float64 { return perAcq(s.ClientCmds, s.Acquisitions) }
func (s contendedStats) serverPerAcq() float64 { return perAcq(s.ServerCmds, s.Acquisitions) }

func perAcq(cmds int64, acq int) float64 {
	if acq == 0 {
		return 0
	}
	return float64(cmds) / float64(acq)
}

// analyzeContended merges the acquisitions of all goroutines (of all
// processes) by acquisition time. goroutines is how many took part, so that
// one that never acquired counts as 0 in the fairness figures.
func analyzeContended(name string, res runResult, d time.Duration, goroutines, procs int, delta cmdStats) contendedStats {
	recs := slices.Clone(res.Records)
	slices.SortFunc(recs, func(a, b record) int {
		return cmp.Or(cmp.Compare(a.Acq, b.Acq), cmp.Compare(a.G, b.G))
	})
	s := contendedStats{
		Contender:    name,
		Acquisitions: len(recs),
		AcqPerSec:    float64(len(recs)) / d.Seconds(),
		ClientCmds:   res.Commands + delta.pubsub(),
		ServerCmds:   delta.total(),
		GaveUp:       res.GaveUp,
		Errors:       res.Errors,
		FirstError:   res.FirstError,
		Late:         res.Late,
		ServerTop:    topCommands(delta, 6),
		ClientCPU:    perOp(res.ClientCPU, len(recs)),
		RedisCPU:     perOp(res.RedisCPU, len(recs)),
	}
	perG := make([]int, goroutines)
	perP := make([]int, procs)
	var waits []time.Duration
	var lastRel int64
	run := 0
	for i, r := range recs {
		if r.G >= 0 && r.G < goroutines {
			perG[r.G]++
		}
		if r.P >= 0 && r.P < procs {
			perP[r.P]++
		}
		if i > 0 && recs[i-1].P == r.P {
			run++
		} else {
			run = 1
		}
		s.LongestProcRun = max(s.LongestProcRun, run)
		if i > 0 && r.Acq < lastRel {
			s.Overlaps++
		}
		lastRel = max(lastRel, r.Rel)
		if i > 0 && recs[i-1].G != r.G {
			waits = append(waits, time.Duration(r.Acq-r.Call))
		}
	}
	slices.Sort(waits)
	s.Handovers = len(waits)
	s.WaitP50, s.WaitP99 = percentile(waits, 0.50), percentile(waits, 0.99)
	if len(waits) > 0 {
		s.WaitMax = waits[len(waits)-1]
	}
	if len(perG) > 0 {
		s.MinPerG, s.MaxPerG = slices.Min(perG), slices.Max(perG)
	}
	if len(perP) > 0 {
		s.MinPerProc, s.MaxPerProc = slices.Min(perP), slices.Max(perP)
	}
	if s.MaxPerG > 0 {
		s.Fairness = float64(s.MinPerG) / float64(s.MaxPerG)
	}
	return s
}

// percentile is the nearest-rank q-quantile of sorted, 0 when empty.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// topCommands lists the n commands with most calls, the harness's excluded.
func topCommands(s cmdStats, n int) []cmdCount {
	var out []cmdCount
	for k, v := range s {
		if !harnessCommand(k) {
			out = append(out, cmdCount{k, v})
		}
	}
	slices.SortFunc(out, func(a, b cmdCount) int {
		return cmp.Or(cmp.Compare(b.Calls, a.Calls), cmp.Compare(a.Name, b.Name))
	})
	return out[:min(n, len(out))]
}
