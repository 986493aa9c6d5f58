package actorlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/observe"
)

// instrumentation is the name and version the runtime's meter and tracer
// report as their instrumentation scope.
const instrumentation = "github.com/actorlock/actorlock"

// acqKind is the `kind` attribute of an acquisition.
type acqKind int

const (
	kindLock acqKind = iota
	kindFair
	kindRead
	kindWrite
	kindMulti
	kindRed
	kindSemaphore
	kindPermit
	nKinds
)

var kindNames = [nKinds]string{"lock", "fair", "read", "write", "multi", "red", "semaphore", "permit"}

func kindOf(k messages.Kind) acqKind {
	switch k {
	case messages.Kind_KIND_FAIR:
		return kindFair
	case messages.Kind_KIND_READ:
		return kindRead
	case messages.Kind_KIND_WRITE:
		return kindWrite
	}
	return kindLock
}

// outcome is the `outcome` attribute of an acquisition.
type outcome int

const (
	outAcquired outcome = iota
	outNotAcquired
	outCanceled
	outError
	nOutcomes
)

var outcomeNames = [nOutcomes]string{"acquired", "not_acquired", "canceled", "error"}

func outcomeOf(err error) outcome {
	switch {
	case err == nil:
		return outAcquired
	case errors.Is(err, ErrNotAcquired):
		return outNotAcquired
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return outCanceled
	}
	return outError
}

var lossReasons = [...]actors.LossReason{actors.LossGone, actors.LossTaken, actors.LossRenewalFailed, actors.LossLocalDeadline}

// durationBuckets (seconds) span a sub-millisecond uncontended acquisition
// to minutes of waiting or holding; OTel's default buckets suit
// milliseconds, not seconds.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// telemetry is a runtime's metrics, tracer, events and list of holds. The
// attribute sets are built once: with the no-op providers a measurement
// then costs an interface call and no allocation.
type telemetry struct {
	tracer  trace.Tracer
	tracing bool // a TracerProvider was given: spans are started
	metered bool // a MeterProvider was given

	acquireDur metric.Float64Histogram
	holdDur    metric.Float64Histogram
	lost       metric.Int64Counter
	renewFail  metric.Int64Counter
	handoffs   metric.Int64Counter
	held       metric.Int64UpDownCounter
	waiters    metric.Int64UpDownCounter
	calls      metric.Int64Counter
	lateness   metric.Float64Histogram
	subsReg    metric.Registration

	acquireOpts [nKinds][nOutcomes][]metric.RecordOption
	kindRecord  [nKinds][]metric.RecordOption
	kindAdd     [nKinds][]metric.AddOption
	lostOpts    [nKinds][len(lossReasons)][]metric.AddOption
	handoffOpts [nKinds][2][]metric.AddOption // [kind][local]
	callOpts    sync.Map                      // script name -> []metric.AddOption

	events *dispatcher // nil: no WithEvents
	holds  heldList
}

func newTelemetry(cfg *config) (*telemetry, error) {
	t := &telemetry{}
	t.holds.m = map[uint64]*holdTrack{}
	tp := cfg.tracerProvider
	if tp != nil {
		t.tracing = true
		t.tracer = tp.Tracer(instrumentation)
	}
	mp := cfg.meterProvider
	t.metered = mp != nil
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter(instrumentation)
	var errs []error
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	upDown := func(name, unit, desc string) metric.Int64UpDownCounter {
		c, err := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	t.acquireDur = hist("actorlock.acquire.duration", "Time an acquisition took, waiting included, by kind and outcome.")
	t.holdDur = hist("actorlock.hold.duration", "Time a lock was held, from its grant to its release or loss.")
	t.lost = counter("actorlock.lost", "{hold}", "Holds lost before they were unlocked, by reason.")
	t.renewFail = counter("actorlock.renewal.failures", "{hold}", "Watchdog renewals of a hold that failed (Redis error or timeout).")
	t.handoffs = counter("actorlock.handoffs", "{handoff}", "Locks that went from a release to a waiter of this runtime: local (in one script) or remote (through Redis).")
	t.held = upDown("actorlock.held", "{hold}", "Holds of this runtime now.")
	t.waiters = upDown("actorlock.waiters", "{waiter}", "Acquisitions of this runtime waiting now.")
	t.calls = counter("actorlock.redis.calls", "{call}", "Lua script calls sent to Redis, by script.")
	t.lateness = hist("actorlock.queue.lateness", "How long after its due time a delayed-queue item was moved into its list.")
	if err := joinCauses(errs...); err != nil {
		return nil, err
	}
	for k := range nKinds {
		kind := attribute.String("kind", kindNames[k])
		t.kindRecord[k] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kind))}
		t.kindAdd[k] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kind))}
		for o := range nOutcomes {
			t.acquireOpts[k][o] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kind, attribute.String("outcome", outcomeNames[o])))}
		}
		for i, r := range lossReasons {
			t.lostOpts[k][i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kind, attribute.String("reason", string(r))))}
		}
		for i, via := range [2]string{"remote", "local"} {
			t.handoffOpts[k][i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kind, attribute.String("via", via)))}
		}
	}
	return t, nil
}

// startEvents starts the WithEvents goroutine, once nothing can fail before
// Close is there to stop it.
func (t *telemetry) startEvents(fn func(observe.Event)) { t.events = newDispatcher(fn) }

// observeSubscriptions registers the subscriptions gauge, read from the
// actors when a reader collects; Close unregisters it.
func (t *telemetry) observeSubscriptions(mp metric.MeterProvider, rt *Runtime) error {
	if mp == nil {
		return nil
	}
	g, err := mp.Meter(instrumentation).Int64ObservableGauge("actorlock.subscriptions", metric.WithUnit("{channel}"),
		metric.WithDescription("Pub/sub channels and patterns the runtime is subscribed to."))
	if err != nil {
		return err
	}
	t.subsReg, err = mp.Meter(instrumentation).RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		if rt.closed.Load() {
			return nil
		}
		s, err := rt.actors.Stats(ctx)
		if err != nil {
			return nil // a collection must not fail because the runtime is busy or closing
		}
		o.ObserveInt64(g, int64(s.Subscriptions))
		return nil
	}, g)
	return err
}

// close stops what telemetry runs: the gauge's callback and the events
// goroutine (which delivers what is buffered first, up to ctx).
func (t *telemetry) close(ctx context.Context) error {
	var err error
	if t.subsReg != nil {
		err = t.subsReg.Unregister()
	}
	return joinCauses(err, t.events.close(ctx))
}

// observer is what the actors report through.
func (t *telemetry) observer() actors.Observer {
	o := actors.Observer{Handoff: t.handoff, RenewalFailed: t.renewalFailed, QueueLateness: t.queueLateness}
	if t.metered {
		// Counted through a context value: without metrics, none is set.
		o.ScriptCall = t.scriptCall
	}
	return o
}

func (t *telemetry) handoff(key actors.LockKey, from, to string, local bool) {
	i := 0
	if local {
		i = 1
	}
	k := kindOf(key.Kind)
	t.handoffs.Add(context.Background(), 1, t.handoffOpts[k][i]...)
	if local {
		t.events.emit(observe.Event{Kind: observe.EventHandedOff, Name: key.Name, LockKind: kindNames[k], Owner: to, From: from})
	}
}

func (t *telemetry) renewalFailed(name, owner string, err error) {
	t.renewFail.Add(context.Background(), 1)
	t.events.emit(observe.Event{Kind: observe.EventRenewalFailed, Name: name, Owner: owner, Err: err})
}

func (t *telemetry) queueLateness(_ string, late []time.Duration) {
	for _, d := range late {
		t.lateness.Record(context.Background(), d.Seconds())
	}
}

func (t *telemetry) scriptCall(script string) {
	opts, ok := t.callOpts.Load(script)
	if !ok {
		opts, _ = t.callOpts.LoadOrStore(script, []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("script", script)))})
	}
	t.calls.Add(context.Background(), 1, opts.([]metric.AddOption)...)
}

// acquireObs follows one acquisition: its duration, its span, whether it
// counts as a waiter.
type acquireObs struct {
	t       *telemetry
	ctx     context.Context
	kind    acqKind
	name    string
	start   time.Time
	span    trace.Span // nil without tracing
	waiting bool       // counted in actorlock.waiters
	gaveUp  bool       // it had a wait time: ErrNotAcquired means it gave up
}

// startAcquire starts following an acquisition; ctx carries its span (when
// tracing) for the calls made for it.
func (t *telemetry) startAcquire(ctx context.Context, kind acqKind, name string, waiting, gaveUp bool) (context.Context, acquireObs) {
	o := acquireObs{t: t, ctx: ctx, kind: kind, name: name, start: time.Now(), waiting: waiting, gaveUp: gaveUp}
	if t.tracing {
		attrs := []attribute.KeyValue{attribute.String("actorlock.kind", kindNames[kind])}
		if name != "" { // a MultiLock or RedLock: its members' spans name them
			attrs = append(attrs, attribute.String("actorlock.name", name))
		}
		ctx, o.span = t.tracer.Start(ctx, "actorlock.acquire", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
		o.ctx = ctx
	}
	if waiting {
		t.waiters.Add(ctx, 1, t.kindAdd[kind]...)
	}
	return ctx, o
}

// end records the acquisition's outcome; token is the fencing token of a
// lock acquisition (0: none).
func (o acquireObs) end(err error, owner string, token int64) {
	t := o.t
	waited := time.Since(o.start)
	out := outcomeOf(err)
	if o.waiting {
		t.waiters.Add(o.ctx, -1, t.kindAdd[o.kind]...)
	}
	t.acquireDur.Record(o.ctx, waited.Seconds(), t.acquireOpts[o.kind][out]...)
	if o.span != nil {
		o.span.SetAttributes(attribute.Float64("actorlock.wait", waited.Seconds()), attribute.String("actorlock.outcome", outcomeNames[out]))
		if out == outAcquired && token != 0 {
			o.span.SetAttributes(attribute.Int64("actorlock.token", token))
		}
		if out == outError {
			o.span.RecordError(err)
			o.span.SetStatus(codes.Error, err.Error())
		}
		o.span.End()
	}
	if o.gaveUp && out == outNotAcquired && o.kind <= kindWrite {
		t.events.emit(observe.Event{Kind: observe.EventGaveUp, Name: o.name, LockKind: kindNames[o.kind], Owner: owner, Wait: waited, Err: err})
	}
}

// primitiveObs is the telemetry as package primitive's handles use it
// (core.Observer).
type primitiveObs struct{ t *telemetry }

// StartPermits follows an acquisition of permits, of kind "semaphore" or
// "permit"; a try that got nothing counts as not acquired.
func (p primitiveObs) StartPermits(ctx context.Context, expirable bool, name string, waiting bool) (context.Context, func(bool, error)) {
	kind := kindSemaphore
	if expirable {
		kind = kindPermit
	}
	ctx, obs := p.t.startAcquire(ctx, kind, name, waiting, false)
	return ctx, func(acquired bool, err error) {
		if err == nil && !acquired {
			err = ErrNotAcquired
		}
		obs.end(err, "", 0)
	}
}

// StartSpan is the span of a queue call.
func (p primitiveObs) StartSpan(ctx context.Context, op, name string) (context.Context, func(*error)) {
	ctx, span := p.t.startSpan(ctx, op, name)
	return ctx, span.end
}

func tokenOf(h *Held) int64 {
	if h == nil {
		return 0
	}
	return h.token
}

// spanObs is the span of an Unlock or a queue call (a nil span without
// tracing).
type spanObs struct{ span trace.Span }

func (t *telemetry) startSpan(ctx context.Context, op, name string) (context.Context, spanObs) {
	if !t.tracing {
		return ctx, spanObs{}
	}
	ctx, span := t.tracer.Start(ctx, op, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attribute.String("actorlock.name", name)))
	return ctx, spanObs{span: span}
}

func (s spanObs) end(err *error) {
	if s.span == nil {
		return
	}
	if *err != nil {
		s.span.RecordError(*err)
		s.span.SetStatus(codes.Error, (*err).Error())
	}
	s.span.End()
}
