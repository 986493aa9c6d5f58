package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// The targets for actorlock, relative to the baseline.
const (
	targetA          = 0.95 // (a) ops/s vs baseline
	targetBAcq       = 1.2  // (b) acquisitions/s vs baseline
	targetBFairness  = 0.5  // (b) min/max acquisitions per goroutine
	targetBCmds      = 3.0  // (b) client-issued commands per acquisition
	targetCAcq       = 1.0  // (c) acquisitions/s vs baseline
	targetCCmds      = 4.0  // (c) client-issued commands per acquisition
	verdictContender = "actorlock"
	baselineName     = "baseline"
)

func newTable(out io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
}

// ratio renders v/base as "1.23x"; "n/a" without a baseline.
func ratio(v, base float64, haveBase bool) string {
	if !haveBase || base == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", v/base)
}

func withRatio(value string, v, base float64, haveBase bool) string {
	return fmt.Sprintf("%s (%s)", value, ratio(v, base, haveBase))
}

// fmtDur prints a duration with three significant figures in plain ASCII.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fus", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func printUncontended(out io.Writer, id string, goroutines int, o options, rows []uncontendedStats) {
	fmt.Fprintf(out, "\n(%s) uncontended: %d goroutine(s), each on its own lock name, lock+unlock loop, %v per contender; (x): ratio to baseline\n", id, goroutines, o.Duration)
	base, haveBase := baselineRow(rows, func(r uncontendedStats) string { return r.Contender })
	tw := newTable(out)
	fmt.Fprintf(tw, "contender\tops/s\tpair p50\tpair p99\tlock p50\tserver cmds/pair\tclient CPU/pair\tRedis CPU/pair\terrors\ttarget ops/s>=%.2fx\n", targetA)
	for _, r := range rows {
		verdict := "-"
		if r.Contender == verdictContender {
			verdict = "n/a (no baseline)"
			if haveBase {
				verdict = passFail(r.OpsPerSec >= targetA*base.OpsPerSec)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.Contender,
			withRatio(fmt.Sprintf("%.0f", r.OpsPerSec), r.OpsPerSec, base.OpsPerSec, haveBase),
			withRatio(fmtDur(r.P50), float64(r.P50), float64(base.P50), haveBase),
			withRatio(fmtDur(r.P99), float64(r.P99), float64(base.P99), haveBase),
			withRatio(fmtDur(r.LockP50), float64(r.LockP50), float64(base.LockP50), haveBase),
			withRatio(fmt.Sprintf("%.1f", r.serverPerPair()), r.serverPerPair(), base.serverPerPair(), haveBase),
			withRatio(fmtDur(r.ClientCPU), float64(r.ClientCPU), float64(base.ClientCPU), haveBase),
			withRatio(fmtDur(r.RedisCPU), float64(r.RedisCPU), float64(base.RedisCPU), haveBase),
			r.Errors, verdict)
	}
	_ = tw.Flush()
	fmt.Fprintln(out, "  pair: lock call to unlock returned; lock p50: the lock call alone. server cmds/pair: commandstats calls")
	fmt.Fprintln(out, "  (incl. those inside Lua scripts) per completed pair. CPU/pair: getrusage of the client process, INFO cpu of")
	fmt.Fprintln(out, "  redis-server, over the run, per completed pair. The target applies to actorlock.")
	for _, r := range rows {
		if r.FirstError != "" {
			fmt.Fprintf(out, "  %s first error: %s\n", r.Contender, r.FirstError)
		}
	}
}

func printContended(out io.Writer, id string, o options, rows []contendedStats) {
	var shape string
	minAcq, maxCmds := targetBAcq, targetBCmds
	if id == "b" {
		shape = fmt.Sprintf("%d goroutines in one process", o.Goroutines)
	} else {
		shape = fmt.Sprintf("%d processes x %d goroutines", o.Procs, o.PerProc)
		minAcq, maxCmds = targetCAcq, targetCCmds
	}
	fmt.Fprintf(out, "\n(%s) contended: %s on ONE lock name, critical section %v busy-spin, %v per contender\n", id, shape, o.Spin, o.ContendedDuration)
	base, haveBase := baselineRow(rows, func(r contendedStats) string { return r.Contender })
	tw := newTable(out)
	header := []string{
		"contender", "acq/s", "wait p50", "wait p99", "wait max",
		"handovers", "acq/gor min-max", "fairness",
	}
	if id == "c" {
		header = append(header, "acq/proc min-max", "max 1-proc run")
	}
	header = append(header,
		"client cmds/acq", "server cmds/acq", "client CPU/acq", "Redis CPU/acq", "gave up", "errors", "overlaps",
		fmt.Sprintf("target acq/s>=%.1fx", minAcq),
	)
	if id == "b" {
		header = append(header, fmt.Sprintf("target fair>=%.1f", targetBFairness))
	}
	header = append(header, fmt.Sprintf("target cmds<=%.0f", maxCmds))
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		cells := []string{
			r.Contender,
			withRatio(fmt.Sprintf("%.0f", r.AcqPerSec), r.AcqPerSec, base.AcqPerSec, haveBase),
			withRatio(fmtDur(r.WaitP50), float64(r.WaitP50), float64(base.WaitP50), haveBase),
			withRatio(fmtDur(r.WaitP99), float64(r.WaitP99), float64(base.WaitP99), haveBase),
			fmtDur(r.WaitMax),
			fmt.Sprint(r.Handovers),
			fmt.Sprintf("%d-%d", r.MinPerG, r.MaxPerG),
			withRatio(fmt.Sprintf("%.2f", r.Fairness), r.Fairness, base.Fairness, haveBase),
		}
		if id == "c" {
			cells = append(cells, fmt.Sprintf("%d-%d", r.MinPerProc, r.MaxPerProc), fmt.Sprint(r.LongestProcRun))
		}
		cells = append(cells,
			withRatio(fmt.Sprintf("%.2f", r.clientPerAcq()), r.clientPerAcq(), base.clientPerAcq(), haveBase),
			withRatio(fmt.Sprintf("%.2f", r.serverPerAcq()), r.serverPerAcq(), base.serverPerAcq(), haveBase),
			withRatio(fmtDur(r.ClientCPU), float64(r.ClientCPU), float64(base.ClientCPU), haveBase),
			withRatio(fmtDur(r.RedisCPU), float64(r.RedisCPU), float64(base.RedisCPU), haveBase),
			gaveUpCell(r),
			fmt.Sprint(r.Errors),
			fmt.Sprint(r.Overlaps),
		)
		verdicts := []string{"-", "-", "-"}
		if r.Contender == verdictContender {
			acqOK := "n/a (no baseline)"
			if haveBase {
				acqOK = passFail(r.AcqPerSec >= minAcq*base.AcqPerSec)
			}
			verdicts = []string{acqOK, passFail(r.Fairness >= targetBFairness), passFail(r.clientPerAcq() <= maxCmds)}
		}
		if id != "b" {
			verdicts = []string{verdicts[0], verdicts[2]}
		}
		fmt.Fprintln(tw, strings.Join(append(cells, verdicts...), "\t"))
	}
	_ = tw.Flush()
	fmt.Fprintln(out, "  (x): ratio to baseline. wait: lock call to acquired, only for handovers (acquisitions whose previous")
	fmt.Fprintln(out, "  acquisition was by another goroutine). fairness: acq/gor min/max.")
	if id == "c" {
		fmt.Fprintln(out, "  max 1-proc run: most consecutive acquisitions by the goroutines of one process.")
	}
	fmt.Fprintln(out, "  client cmds/acq: hook-counted commands + SUBSCRIBE-family calls from commandstats; server cmds/acq: all")
	fmt.Fprintln(out, "  commandstats calls (incl. those inside Lua scripts) less the harness's INFO/CONFIG.")
	fmt.Fprintln(out, "  Targets apply to actorlock; the cmds/acq verdict uses the CLIENT-ISSUED count.")
	for _, r := range rows {
		var top []string
		for _, c := range r.ServerTop {
			top = append(top, fmt.Sprintf("%s=%d", c.Name, c.Calls))
		}
		fmt.Fprintf(out, "  %s: %d acquisitions; server commands: %s\n", r.Contender, r.Acquisitions, strings.Join(top, " "))
		if r.FirstError != "" {
			fmt.Fprintf(out, "  %s first error: %s\n", r.Contender, r.FirstError)
		}
		if r.Late > 50*time.Millisecond {
			fmt.Fprintf(out, "  %s: a process started %v late\n", r.Contender, r.Late)
		}
	}
}

// gaveUpCell: only redsync gives up on its own.
func gaveUpCell(r contendedStats) string {
	if r.Contender == "redsync" {
		return fmt.Sprint(r.GaveUp)
	}
	return "-"
}

// baselineRow finds the baseline's row, which every ratio is relative to.
func baselineRow[T any](rows []T, contender func(T) string) (T, bool) {
	for _, r := range rows {
		if contender(r) == baselineName {
			return r, true
		}
	}
	var zero T
	return zero, false
}
