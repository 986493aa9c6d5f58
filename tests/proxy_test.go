package tests

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// cutProxy forwards loopback TCP connections to a target until cut. Cut,
// it drops whatever either side sends, on open connections and new ones,
// and closes nothing: as on a network that stopped carrying packets, no
// end sees an error, so neither learns of the cut from TCP.
type cutProxy struct {
	ln     net.Listener
	target string
	cut    atomic.Bool
	delay  atomic.Int64 // ns each reply (target to client) is held back
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// startCutProxy listens on a free loopback port, forwarding to target; it
// is closed when the test ends.
func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is where the proxy listens.
func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

// Cut stops carrying data, both ways.
func (p *cutProxy) Cut() { p.cut.Store(true) }

// Break closes the connections open now, both ways, as a network error
// would; new ones are carried as before.
func (p *cutProxy) Break() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// DelayReplies holds back what the target sends by d (0: no more), as a
// slow return path would: requests still arrive at once.
func (p *cutProxy) DelayReplies(d time.Duration) { p.delay.Store(int64(d)) }

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		var out net.Conn
		if !p.cut.Load() {
			// A refused dial leaves out nil: in is then read and dropped.
			out, _ = net.Dial("tcp", p.target)
		}
		if !p.track(in, out) {
			return
		}
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, &delayedWriter{p: p, dst: in})
	}
}

// track registers the connections for close; false when closed already.
func (p *cutProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
		return false
	}
	for _, c := range conns {
		if c != nil {
			p.conns[c] = struct{}{}
		}
	}
	return true
}

// pipe copies from src to dst until either ends, dropping the data once the
// proxy is cut (or when dst is nil).
func (p *cutProxy) pipe(src net.Conn, dst io.WriteCloser) {
	defer p.wg.Done()
	if w, ok := dst.(*delayedWriter); ok {
		defer w.stop()
	}
	if src == nil {
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			if dst != nil && !p.cut.Load() {
				_ = dst.Close()
			}
			return
		}
		if dst == nil || p.cut.Load() {
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			_ = src.Close()
			return
		}
	}
}

// delayedWriter writes each chunk once the proxy's reply delay has passed
// since it was read, in order, without adding up the delays of successive
// chunks.
type delayedWriter struct {
	p       *cutProxy
	dst     net.Conn
	start   sync.Once
	stopped sync.Once
	chunks  chan delayedChunk
	writing sync.WaitGroup
}

type delayedChunk struct {
	data []byte
	read time.Time
}

func (w *delayedWriter) Write(b []byte) (int, error) {
	w.start.Do(func() {
		w.chunks = make(chan delayedChunk, 1024)
		w.writing.Go(func() {
			for c := range w.chunks {
				if wait := time.Duration(w.p.delay.Load()) - time.Since(c.read); wait > 0 {
					time.Sleep(wait)
				}
				_, _ = w.dst.Write(c.data) // after an error, drain
			}
		})
	})
	w.chunks <- delayedChunk{data: append([]byte(nil), b...), read: time.Now()}
	return len(b), nil
}

// stop ends the writer once it has written (or failed to write) what it
// holds; it leaves dst open.
func (w *delayedWriter) stop() {
	w.stopped.Do(func() {
		w.start.Do(func() {})
		if w.chunks != nil {
			close(w.chunks)
			w.writing.Wait()
		}
	})
}

func (w *delayedWriter) Close() error {
	w.stop()
	return w.dst.Close()
}

func (p *cutProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
