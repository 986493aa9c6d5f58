package tests

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"

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
		go p.pipe(out, in)
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
func (p *cutProxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
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
