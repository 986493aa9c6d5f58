package chaos

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// faultProxy stands between one worker process and Redis on loopback. It
// can blackhole traffic (swallow what either side sends, close nothing, as
// a network that stopped carrying packets) and drop the reply to the next
// script sent: the script reaches Redis and runs, its reply never comes
// back and the connection then breaks, so the client cannot tell whether it
// ran.
type faultProxy struct {
	ln        net.Listener
	target    string
	blackhole atomic.Bool
	dropArmed atomic.Bool
	dropped   chan struct{} // receives when an armed drop happened
	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
}

func newFaultProxy(target string) (*faultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &faultProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, dropped: make(chan struct{}, 1)}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil { // Redis is down: the client sees a reset, as it would
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		var muted atomic.Bool
		p.wg.Add(2)
		go p.pump(in, out, func(b []byte) {
			if bytes.Contains(bytes.ToLower(b), []byte("evalsha")) || bytes.Contains(bytes.ToLower(b), []byte("$4\r\neval\r\n")) {
				if p.dropArmed.CompareAndSwap(true, false) {
					muted.Store(true)
					// Let Redis run it, then break the connection.
					time.AfterFunc(100*time.Millisecond, func() {
						_ = in.Close()
						_ = out.Close()
						select {
						case p.dropped <- struct{}{}:
						default:
						}
					})
				}
			}
		}, nil)
		go p.pump(out, in, nil, &muted)
	}
}

// pump copies src to dst; seen (if set) looks at each chunk before it is
// forwarded; muted (if set and true) swallows chunks.
func (p *faultProxy) pump(src, dst net.Conn, seen func([]byte), muted *atomic.Bool) {
	defer p.wg.Done()
	defer func() {
		_ = src.Close()
		_ = dst.Close()
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.blackhole.Load() && (muted == nil || !muted.Load()) {
			if seen != nil {
				seen(buf[:n])
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// closeAll breaks every open connection (a partition that healed with the
// peers' TCP state gone).
func (p *faultProxy) closeAll() {
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
}

func (p *faultProxy) close() {
	_ = p.ln.Close()
	p.closeAll()
	p.wg.Wait()
}
