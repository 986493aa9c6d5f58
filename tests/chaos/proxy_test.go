package chaos

import (
	"bytes"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// faultProxy stands between one worker process and Redis on loopback. It
// can blackhole traffic (swallow what either side sends, close nothing, as
// a network that stopped carrying packets), lose packets, and drop the
// reply to the next script sent: the script reaches Redis and runs, its
// reply never comes back and the connection then breaks, so the client
// cannot tell whether it ran.
//
// Packet loss is emulated here because this kernel has no netem (tc says
// "Specified qdisc kind is unknown"), and dropping bytes of a TCP stream
// would corrupt it, which real loss never does. What TCP makes of a lost
// segment is a late one: it is sent again after the retransmission timeout
// (200 ms at least on Linux, doubling while the copies are lost too), and
// everything behind it on the connection waits (head-of-line blocking).
// So, while loss is on, each chunk is lost with probability loss and
// delayed by that backoff before it is forwarded, in order; a new
// connection's SYN is lost the same way and costs TCP's 1 s initial
// timeout. Read timeouts and broken connections then come from the
// clients themselves, as they would on a lossy network.
type faultProxy struct {
	ln        net.Listener
	target    atomic.Pointer[string] // where Redis is now (the harness follows a failover)
	blackhole atomic.Bool
	dropArmed atomic.Bool
	dropped   chan struct{} // receives when an armed drop happened
	loss      atomic.Int64  // per mille of packets lost; 0 off
	lost      atomic.Int64  // chunks and SYNs lost since created
	closed    atomic.Bool
	rngMu     sync.Mutex
	rng       *rand.Rand
	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
}

// newFaultProxy listens on a free loopback port; seed draws its losses.
func newFaultProxy(target string, seed uint64) (*faultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &faultProxy{ln: ln, conns: map[net.Conn]struct{}{}, dropped: make(chan struct{}, 1),
		rng: rand.New(rand.NewPCG(seed, 0x1055))}
	p.target.Store(&target)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

// setTarget points new connections at addr and breaks the open ones, as a
// Sentinel-aware proxy does on +switch-master.
func (p *faultProxy) setTarget(addr string) {
	p.target.Store(&addr)
	p.closeAll()
}

// lossDelay is how late TCP would deliver the next segment: 0 unless it is
// lost, else the sum of the retransmission timeouts (first, doubling) until
// a copy gets through.
func (p *faultProxy) lossDelay(first time.Duration) time.Duration {
	pm := p.loss.Load()
	if pm == 0 {
		return 0
	}
	p.rngMu.Lock()
	defer p.rngMu.Unlock()
	var d time.Duration
	for rto := first; p.rng.Int64N(1000) < pm && rto <= 8*first; rto *= 2 {
		d += rto
	}
	if d > 0 {
		p.lost.Add(1)
	}
	return d
}

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(in)
	}
}

func (p *faultProxy) serve(in net.Conn) {
	defer p.wg.Done()
	if d := p.lossDelay(time.Second); d > 0 { // the SYN was lost
		time.Sleep(d)
	}
	out, err := net.Dial("tcp", *p.target.Load())
	if err != nil { // Redis is down: the client sees a reset, as it would
		_ = in.Close()
		return
	}
	p.mu.Lock()
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	p.mu.Unlock()
	if p.closed.Load() { // close ran while the SYN was late: it missed these
		_ = in.Close()
		_ = out.Close()
	}
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
			if d := p.lossDelay(200 * time.Millisecond); d > 0 {
				time.Sleep(d)
			}
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
	p.closed.Store(true)
	_ = p.ln.Close()
	p.closeAll()
	p.wg.Wait()
}
