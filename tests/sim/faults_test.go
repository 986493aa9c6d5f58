package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// Fault kinds, drawn per Redis call (hook) or by the fault loop (world).
const (
	fDelay      = iota // the reply comes back late (a few ms)
	fDelayLong         // the reply comes back after a lease (or the read times out)
	fLostReply         // the command ran; its reply is lost (read timeout)
	fBeforeSend        // the call fails before the command leaves (dial error)
	fKillConn          // a connection of a runtime is closed
	fPubSubSlow        // pub/sub messages of a runtime arrive late for a while
	fPauseWrite        // CLIENT PAUSE WRITE
	fRestart           // redis-server restarts without persistence (unsafe)
	// fLateDup: the call fails to the runtime as a read timeout (after the
	// client's read timeout), while the very same command reaches Redis
	// later, on another connection: a command whose bytes were still on
	// their way when its reply timed out, arriving after the runtime's
	// retry of it (issue 31, defect A's shape).
	fLateDup
	// fLateSend: the command leaves late (a client stalled before writing)
	// and its reply comes back: it reaches Redis up to 2 s after the
	// runtime sent it (issue 31, defect C's shape).
	fLateSend
	// fReleaseOutage: a release's first attempt runs and its reply is lost,
	// then every attempt of that release (same unlock latch) fails before
	// it is sent, for longer than the call timeout, which is how long its
	// latch lives (issue 31, defect D's shape). The same for a primitive's
	// guarded call (issue 33: a semaphore acquisition whose every attempt
	// and settling fails until after its call timeout, defect B's shape).
	fReleaseOutage
	nFaultKinds
)

// lateDupMax bounds how long after its call a late duplicate reaches Redis.
const lateDupMax = 3 * time.Second

var faultNames = [nFaultKinds]string{"delay", "delay-long", "lost-reply", "before-send", "kill-conn", "pubsub-slow", "pause-write", "restart",
	"late-duplicate", "late-send", "release-outage"}

// faults injects faults into one runtime's Redis client: it is the client's
// hook (every command and pipeline, every dial) and wraps each connection.
type faults struct {
	w    *world
	slot int
	// readTimeout of the client: a reply delayed longer is a read timeout,
	// as go-redis would report it.
	readTimeout time.Duration

	mu    sync.Mutex
	rng   *rand.Rand
	conns map[*faultConn]struct{}
	// pubsubSlowUntil: until then, reads of pub/sub connections are delayed.
	pubsubSlowUntil time.Time
	// lossyUntil: until then, half the replies are lost.
	lossyUntil time.Time
	// aims: faults a scenario aims at chosen calls (scenario_test.go).
	aims []*aim
	// outages: releases (by unlock latch key) whose every attempt fails
	// before it is sent until then (fReleaseOutage).
	outages map[string]time.Time

	// renewals: what the runtime's renewal calls did, as it saw them
	// (renewals_test.go).
	renewals renewals
}

// aim is a fault aimed at the calls a scenario chooses, where drawn faults
// would meet them too rarely: the next left calls that match get kind.
type aim struct {
	match func(c scriptCall) bool
	kind  int
	delay time.Duration
	// early: the delay comes before the command is sent (a client stalled
	// before writing), not after it ran.
	early bool
	left  int
	// window (fReleaseOutage): the first hit runs and loses its reply;
	// later ones fail before they are sent, until window after the first.
	window time.Duration
	first  time.Time
	// seen: when each hit call was met (before its fault);
	// hits: when each hit call's outcome was handed back to the runtime.
	seen, hits chan time.Time
}

// scriptCall is an EVALSHA as the hook sees it: the script's name, its
// keys and arguments.
type scriptCall struct {
	script     string
	keys, argv []string
}

func scriptCallOf(c redis.Cmder) (scriptCall, bool) {
	args := c.Args()
	if len(args) < 3 {
		return scriptCall{}, false
	}
	sha := fmt.Sprint(args[1])
	switch cmd := fmt.Sprint(args[0]); {
	case strings.EqualFold(cmd, "evalsha"):
	case strings.EqualFold(cmd, "eval"):
		// go-redis's fallback on NOSCRIPT (a fresh or restarted server):
		// the same script, its body sent whole.
		sha = bodySHA(sha)
	default:
		return scriptCall{}, false
	}
	nkeys, err := strconv.Atoi(fmt.Sprint(args[2]))
	if err != nil || 3+nkeys > len(args) {
		return scriptCall{}, false
	}
	sc := scriptCall{script: scriptName(sha)}
	for i, a := range args[3:] {
		if i < nkeys {
			sc.keys = append(sc.keys, fmt.Sprint(a))
		} else {
			sc.argv = append(sc.argv, fmt.Sprint(a))
		}
	}
	return sc, true
}

// failAll fails cmds with err (the pipeline they share fails with one of
// them) as a's hit.
func (a *aim) failAll(cmds []redis.Cmder, err error) error {
	for _, c := range cmds {
		c.SetErr(err)
	}
	select {
	case a.hits <- time.Now():
	default:
	}
	return err
}

// aimAt arms a; unaim disarms it.
func (f *faults) aimAt(a *aim) *aim {
	a.hits, a.seen = make(chan time.Time, 64), make(chan time.Time, 64)
	f.mu.Lock()
	f.aims = append(f.aims, a)
	f.mu.Unlock()
	return a
}

func (f *faults) unaim(a *aim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, b := range f.aims {
		if b == a {
			f.aims = append(f.aims[:i], f.aims[i+1:]...)
			return
		}
	}
}

// aimed is the aim that hits one of cmds (a pipeline's), and which, or nil.
func (f *faults) aimed(cmds ...redis.Cmder) (*aim, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.aims) == 0 || !f.w.faultsOn.Load() || f.sparesKnown(cmds) {
		return nil, 0
	}
	for i, c := range cmds {
		sc, ok := scriptCallOf(c)
		if !ok {
			continue
		}
		for _, a := range f.aims {
			if a.kind == fReleaseOutage && !a.first.IsZero() && time.Since(a.first) > a.window {
				a.left = 0
			}
			if a.left > 0 && a.match(sc) {
				a.left--
				select {
				case a.seen <- time.Now():
				default:
				}
				return a, i
			}
		}
	}
	return nil, 0
}

// spares reports that one of cmds touches a name a scenario is running on
// (its hash, or a key of its {name} slot): drawn faults spare those calls,
// so that the scenario's check can hold them to its exact bounds.
func (f *faults) spares(cmds ...redis.Cmder) bool {
	m := f.w.model
	if m.sparing.Load() == 0 {
		return false
	}
	for _, c := range cmds {
		for _, a := range c.Args() {
			if s, ok := a.(string); ok {
				if n := m.names[nameIn(s)]; n != nil && n.spared.Load() {
					return true
				}
			}
		}
	}
	return false
}

// nameIn is the lock name a key or argument s stands for: the name in its
// {hash tag} when it has one (the queue, latch and counter keys), else s.
func nameIn(s string) string {
	if i := strings.IndexByte(s, '{'); i >= 0 {
		if j := strings.IndexByte(s[i:], '}'); j > 0 {
			return s[i+1 : i+j]
		}
	}
	return s
}

// watched runs run and, when it fails with no reply from Redis and no
// fault injected (a real read timeout on this loaded machine, a call
// timeout, a connection a Close broke; the dial hook counts its own
// refusals), counts that as a fault on the names of cmds: its command may
// or may not have run, which excuses what an injected fault excuses.
func (f *faults) watched(cmds []redis.Cmder, run func() error) func() error {
	return func() error {
		err := run()
		var reply redis.Error
		if err != nil && !errors.As(err, &reply) && !errors.Is(err, errRefused) {
			names, desc := f.namesOf(cmds...)
			f.w.countUnforced(names, fmt.Sprintf("unforced %v on [%s]", err, desc))
			f.w.holdCalls(cmds, "unforced failure of")
			f.w.permitCalls(cmds, "unforced failure of")
		}
		return err
	}
}

// hitAimed runs cmds (run) with a's fault on cmds[i] alone: its reply lost
// (it ran), or late. A late reply holds the whole pipeline, as it would on
// the wire; a lost one fails that command only, as the runtime sees a
// script's outcome per command.
func (f *faults) hitAimed(a *aim, cmds []redis.Cmder, i int, run func() error) error {
	names, desc := f.namesOf(cmds[i])
	f.w.countAimed(a.kind, names, fmt.Sprintf("aimed %s %v on [%s]", faultNames[a.kind], a.delay, desc))
	f.w.holdCalls(cmds, fmt.Sprintf("aimed fault %s %v on", faultNames[a.kind], a.delay))
	f.w.permitCalls(cmds, fmt.Sprintf("aimed fault %s %v on", faultNames[a.kind], a.delay))
	if a.early {
		time.Sleep(a.delay)
	}
	f.mu.Lock()
	outageGoesOn := a.kind == fReleaseOutage && !a.first.IsZero()
	if a.kind == fReleaseOutage && a.first.IsZero() {
		a.first = time.Now()
	}
	f.mu.Unlock()
	if a.kind == fLateDup {
		// The whole pipeline is late, as its bytes would be; calls of
		// other names in it meet a drawn fault.
		if others, odesc := f.namesOf(append(append([]redis.Cmder(nil), cmds[:i]...), cmds[i+1:]...)...); len(others) > 0 {
			f.w.mark(others, "late-duplicate beside an aimed one on ["+odesc+"]", true)
		}
		f.w.sendLater(cmds, names, desc, a.delay, false)
		time.Sleep(f.readTimeout)
		return a.failAll(cmds, readTimeoutError())
	}
	if a.kind == fBeforeSend || outageGoesOn {
		return a.failAll(cmds, dialError())
	}
	err := run()
	switch {
	case a.kind == fLostReply || a.kind == fReleaseOutage:
		cmds[i].SetErr(readTimeoutError())
		if len(cmds) == 1 {
			err = cmds[i].Err()
		}
	case a.kind == fDelay && !a.early:
		time.Sleep(a.delay)
	}
	select {
	case a.hits <- time.Now():
	default:
	}
	return err
}

func newFaults(w *world, slot int, seed uint64, readTimeout time.Duration) *faults {
	return &faults{w: w, slot: slot, readTimeout: readTimeout, rng: rand.New(rand.NewPCG(seed, uint64(slot)+7)), conns: map[*faultConn]struct{}{},
		outages: map[string]time.Time{}, renewals: newRenewals()}
}

// draw picks the fault for one call (or -1), and a delay for the delay kinds.
func (f *faults) draw() (int, time.Duration) {
	cfg := f.w.cfg
	if !f.w.faultsOn.Load() {
		return -1, 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Right after a long delay, replies are lost in a burst: what a
	// struggling connection does, and what a give-back of a late grant
	// meets while its retries run (issue 23, defect 1).
	if time.Now().Before(f.lossyUntil) && cfg.faultOn(fLostReply) && f.rng.IntN(2) == 0 {
		return fLostReply, 0
	}
	if f.rng.Float64() >= cfg.faultRate {
		return -1, 0
	}
	// Weights of the per-call kinds; long delays are rare, they hold a
	// pipeline flight for over a lease.
	var weights = [...]struct {
		kind int
		w    int
	}{{fDelay, 40}, {fDelayLong, 2}, {fLostReply, 30}, {fBeforeSend, 28}, {fLateDup, 6}, {fLateSend, 3}, {fReleaseOutage, 4}}
	total := 0
	for _, k := range weights {
		if cfg.faultOn(k.kind) {
			total += k.w
		}
	}
	if total == 0 {
		return -1, 0
	}
	r := f.rng.IntN(total)
	for _, k := range weights {
		if !cfg.faultOn(k.kind) {
			continue
		}
		if r >= k.w {
			r -= k.w
			continue
		}
		switch k.kind {
		case fDelay:
			return fDelay, time.Duration(1+f.rng.IntN(30)) * time.Millisecond
		case fDelayLong:
			lease := cfg.maxLease()
			return fDelayLong, lease + time.Duration(f.rng.Int64N(int64(lease/2)))
		case fLateDup:
			// When the duplicate reaches Redis: before the read timeout
			// or after, up to lateDupMax after the call.
			return fLateDup, 200*time.Millisecond + time.Duration(f.rng.Int64N(int64(lateDupMax-200*time.Millisecond)))
		case fLateSend:
			return fLateSend, time.Duration(300+f.rng.IntN(1700)) * time.Millisecond
		case fReleaseOutage:
			// How long past the latch (the call timeout) it lasts.
			return fReleaseOutage, time.Duration(f.rng.IntN(1500)) * time.Millisecond
		}
		return k.kind, 0
	}
	return -1, 0
}

// namesOf is the lock names a command touches, and a short form of the
// commands (for the history).
func (f *faults) namesOf(cmds ...redis.Cmder) ([]string, string) {
	var out []string
	var desc strings.Builder
	for i, c := range cmds {
		if i > 0 {
			desc.WriteString(" | ")
		}
		for j, a := range c.Args() {
			s := fmt.Sprint(a)
			if f.w.model.historyOf(nameIn(s)) != nil {
				out = append(out, nameIn(s))
			}
			if j == 1 && len(s) == 40 {
				s = scriptName(s)
			} else if j == 1 && strings.EqualFold(fmt.Sprint(c.Args()[0]), "eval") {
				s = scriptName(bodySHA(s))
			}
			s = strings.Map(func(r rune) rune {
				if r < 0x20 || r == utf8.RuneError {
					return '.'
				}
				return r
			}, s)
			if len(s) > 24 {
				s = s[:10] + "…" + s[len(s)-10:]
			}
			if j < 12 {
				desc.WriteString(s + " ")
			}
		}
	}
	return out, desc.String()
}

// simTrace (SIM_TRACE=1): every call on a name goes into its history,
// with its outcome, and a violation shows the whole history (histLen
// events): what the runtime asked of Redis around it.
var simTrace = os.Getenv("SIM_TRACE") != ""

// trace records each of cmds, sent at sent, in the histories of its names.
func (f *faults) trace(cmds []redis.Cmder, sent time.Time) {
	for _, c := range cmds {
		names, desc := f.namesOf(c)
		if len(names) == 0 {
			continue
		}
		out := c.String() // the command and its reply: "args: reply"
		if i := strings.LastIndex(out, ": "); i >= 0 {
			out = out[i+2:]
		}
		if err := c.Err(); err != nil {
			out = err.Error()
		}
		if len(out) > 120 {
			out = out[:120] + "…"
		}
		m := f.w.model
		m.mu.Lock()
		for i, name := range names {
			if n := m.historyOf(name); n != nil && !slices.Contains(names[:i], name) {
				n.record(-2, "call (%.0fms) %s-> %s", time.Since(sent).Seconds()*1000, desc, out)
			}
		}
		m.mu.Unlock()
	}
}

// errRefused is the cause of every injected dial error.
var errRefused = errors.New("connect: connection refused (injected)")

func dialError() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: errRefused}
}

func readTimeoutError() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
}

// apply runs call (nil: the command never leaves) with fault kind: what
// the caller sees is exactly what go-redis reports for the real fault.
func (f *faults) apply(kind int, delay time.Duration, cmds []redis.Cmder, names []string, desc string, run func() error, fail func(error)) error {
	if kind == fReleaseOutage && !f.startOutage(cmds, delay) {
		kind = -1 // not a release: no fault
	}
	if kind < 0 {
		return run()
	}
	f.w.countFault(kind, names, fmt.Sprintf("%s %v on [%s]", faultNames[kind], delay, desc))
	f.w.holdCalls(cmds, fmt.Sprintf("fault %s %v on", faultNames[kind], delay))
	f.w.permitCalls(cmds, fmt.Sprintf("fault %s %v on", faultNames[kind], delay))
	switch kind {
	case fLateDup:
		f.w.sendLater(cmds, names, desc, delay, true)
		time.Sleep(f.readTimeout)
		err := readTimeoutError()
		fail(err)
		return err
	case fLateSend:
		time.Sleep(delay)
		return run()
	case fReleaseOutage:
		_ = run()
		err := readTimeoutError()
		fail(err)
		return err
	case fBeforeSend:
		err := dialError()
		fail(err)
		return err
	case fLostReply:
		_ = run()
		err := readTimeoutError()
		fail(err)
		return err
	default: // fDelay, fDelayLong
		err := run()
		if delay >= f.readTimeout {
			time.Sleep(f.readTimeout)
			err = readTimeoutError()
			fail(err)
			return err
		}
		time.Sleep(delay)
		if kind == fDelayLong {
			f.mu.Lock()
			f.lossyUntil = time.Now().Add(time.Duration(200+f.rng.IntN(800)) * time.Millisecond)
			f.mu.Unlock()
		}
		return err
	}
}

func (f *faults) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if f.w.faultsOn.Load() && f.w.cfg.refusesDials() && f.w.model.sparingDials.Load() == 0 {
			f.mu.Lock()
			fail := f.rng.Float64() < f.w.cfg.faultRate/4
			f.mu.Unlock()
			if fail {
				f.w.countFault(fBeforeSend, nil, "")
				return nil, dialError()
			}
		}
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		fc := &faultConn{Conn: c, f: f}
		f.mu.Lock()
		f.conns[fc] = struct{}{}
		f.mu.Unlock()
		return fc, nil
	}
}

func (f *faults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		f.w.calls.Add(1)
		cmds := []redis.Cmder{cmd}
		if simTrace {
			defer f.trace(cmds, time.Now())
		}
		defer f.renewals.observe(f.w, cmds, time.Now())
		defer f.w.primCalls(cmds)()
		run := f.watched(cmds, func() error { return next(ctx, cmd) })
		if a, _ := f.aimed(cmd); a != nil {
			return f.hitAimed(a, cmds, 0, run)
		}
		if f.spares(cmd) {
			return run()
		}
		if err := f.outage(cmds); err != nil {
			cmd.SetErr(err)
			return err
		}
		kind, delay := f.draw()
		kind, delay = f.spareKnown(kind, delay, cmds)
		var names []string
		var desc string
		if kind >= 0 {
			names, desc = f.namesOf(cmd)
		}
		return f.apply(kind, delay, cmds, names, desc, run, cmd.SetErr)
	}
}

func (f *faults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		f.w.calls.Add(int64(len(cmds)))
		if simTrace {
			defer f.trace(cmds, time.Now())
		}
		defer f.renewals.observe(f.w, cmds, time.Now())
		defer f.w.primCalls(cmds)()
		run := f.watched(cmds, func() error { return next(ctx, cmds) })
		if a, i := f.aimed(cmds...); a != nil {
			return f.hitAimed(a, cmds, i, run)
		}
		if f.spares(cmds...) {
			return run()
		}
		if err := f.outage(cmds); err != nil {
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		kind, delay := f.draw()
		kind, delay = f.spareKnown(kind, delay, cmds)
		var names []string
		var desc string
		if kind >= 0 {
			names, desc = f.namesOf(cmds...)
			// A pipeline's fault hits every command in it.
			f.w.faultedCalls.Add(int64(len(cmds) - 1))
		}
		return f.apply(kind, delay, cmds, names, desc, run, func(err error) {
			for _, c := range cmds {
				c.SetErr(err)
			}
		})
	}
}

// killConn closes one connection of the runtime (a pub/sub one if pubsub),
// as a server-side CLIENT KILL or a reset would; false if none.
func (f *faults) killConn(pubsub bool) bool {
	f.mu.Lock()
	var victims []*faultConn
	for c := range f.conns {
		if (!pubsub || c.pubsub.Load()) && !(f.w.cfg.knownPrim(findingS) && c.popping.Load()) {
			victims = append(victims, c)
		}
	}
	var v *faultConn
	if len(victims) > 0 {
		v = victims[f.rng.IntN(len(victims))]
	}
	f.mu.Unlock()
	if v == nil {
		return false
	}
	_ = v.Conn.Close()
	return true
}

func (f *faults) slowPubSub(d time.Duration) {
	f.mu.Lock()
	f.pubsubSlowUntil = time.Now().Add(d)
	f.mu.Unlock()
}

// faultConn is one connection of a runtime's client: it learns whether it
// carries pub/sub (it sent a SUBSCRIBE) and then may delay what it reads.
type faultConn struct {
	net.Conn
	f      *faults
	pubsub atomic.Bool
	closed atomic.Bool
	// popping: its last write carried a blocking pop (SIM_KNOWN=S).
	popping atomic.Bool
}

var subscribe = []byte("subscribe")

func (c *faultConn) Write(p []byte) (int, error) {
	lower := bytes.ToLower(p)
	if !c.pubsub.Load() && bytes.Contains(lower, subscribe) {
		c.pubsub.Store(true)
	}
	c.popping.Store(bytes.Contains(lower, blmoveCmd))
	return c.Conn.Write(p)
}

func (c *faultConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.pubsub.Load() {
		c.f.mu.Lock()
		var d time.Duration
		if time.Now().Before(c.f.pubsubSlowUntil) {
			d = time.Duration(5+c.f.rng.IntN(200)) * time.Millisecond
		}
		c.f.mu.Unlock()
		if d > 0 {
			time.Sleep(d)
		}
	}
	return n, err
}

func (c *faultConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.f.mu.Lock()
		delete(c.f.conns, c)
		c.f.mu.Unlock()
	}
	return c.Conn.Close()
}

// guardedPrimScripts are the primitives' scripts that run under a
// request's duplicate guard (scripts.Guard, the last key), which every
// attempt of the request and its settling share.
var guardedPrimScripts = []string{"queue_offer", "queue_push", "queue_give_back", "queue_delayed_remove",
	"semaphore_acquire", "semaphore_add", "semaphore_try_set", "semaphore_drain", "semaphore_expirable_release",
	"latch_try_set", "latch_count_down", "latch_delete"}

// latchOf is the guard key of cmds' release script, or of a primitive's
// guarded script, if any (scripts.Guard: one per run of a release, one per
// request of a primitive, which its retries and its settling share; the
// last key), "" if none.
func latchOf(cmds []redis.Cmder) string {
	if l := latchesOf(cmds); len(l) > 0 {
		return l[0]
	}
	return ""
}

// latchesOf is the guard keys of every release or guarded primitive
// script among cmds (a pipeline carries calls of several requests).
func latchesOf(cmds []redis.Cmder) []string {
	var out []string
	for _, c := range cmds {
		if sc, ok := scriptCallOf(c); ok && (slices.Contains(unlockScripts, sc.script) || slices.Contains(guardedPrimScripts, sc.script)) {
			if k := arg(sc.keys, len(sc.keys)-1); strings.HasPrefix(k, "actorlock_request:") {
				out = append(out, k)
			}
		}
	}
	return out
}

// startOutage starts a release outage on the release among cmds, if any:
// its every attempt fails before it is sent until the call timeout (how
// long its latch lives) plus extra from now.
func (f *faults) startOutage(cmds []redis.Cmder, extra time.Duration) bool {
	latch := latchOf(cmds)
	if latch == "" {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outages[latch] = time.Now().Add(f.w.cfg.callTimeout + extra)
	return true
}

// outage fails cmds before they are sent when they carry a release under
// an outage, wherever it rides in a pipeline (the pipeline they share
// fails with it).
func (f *faults) outage(cmds []redis.Cmder) error {
	var until time.Time
	ok := false
	f.mu.Lock()
	for _, latch := range latchesOf(cmds) {
		u, on := f.outages[latch]
		if on && !time.Now().Before(u) {
			delete(f.outages, latch)
			on = false
		}
		if on {
			until, ok = u, true
		}
	}
	f.mu.Unlock()
	if !ok || !f.w.faultsOn.Load() || f.sparesKnown(cmds) {
		return nil
	}
	names, desc := f.namesOf(cmds...)
	f.w.countFault(fReleaseOutage, names, fmt.Sprintf("release-outage (until %s) on [%s]", until.Format("15:04:05.000"), desc))
	return dialError()
}
