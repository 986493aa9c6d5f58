package tests

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/observe"
)

// BenchmarkAcquireUnlock measures one uncontended Acquire and Unlock with
// no-op providers (the default) and with the OTel SDK's (a ManualReader,
// a tracer sampling every span into memory) plus an events callback:
// what observing costs next to the two Redis round trips.
//
//	go test -run '^$' -bench BenchmarkAcquireUnlock -count 3 ./tests/
func BenchmarkAcquireUnlock(b *testing.B) {
	srv := startRedis(b)
	rdb := client(b, srv.Addr)
	for _, bc := range []struct {
		name string
		opts func(b *testing.B) []actorlock.Option
	}{
		{"noop", func(*testing.B) []actorlock.Option { return nil }},
		{"sdk", func(b *testing.B) []actorlock.Option {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
			b.Cleanup(func() {
				_ = tp.Shutdown(context.Background())
				_ = mp.Shutdown(context.Background())
			})
			return []actorlock.Option{actorlock.WithMeterProvider(mp), actorlock.WithTracerProvider(tp), actorlock.WithEvents(func(observe.Event) {})}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rt := newRuntime(b, rdb, bc.opts(b)...)
			l := rt.Lock("bench:" + bc.name)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				h, err := l.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := h.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
