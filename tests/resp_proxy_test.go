package tests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// respProxy forwards loopback TCP connections to a Redis server and reads
// both directions as RESP, pairing each reply with its command, so that a
// test can act on the commands it picks instead of hoping a race goes its
// way: hold a command back before Redis sees it (even after the client gave
// up on it), delay its reply, drop its reply after it ran, or refuse it
// unsent. Dropping a reply or refusing a command closes the client's
// connection, which is how a client meets a lost reply: as an error after
// the write, outcome unknown. A connection that subscribes is passed
// through untouched from then on (its messages answer no command).
type respProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	rules []*proxyRule
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// proxyAction is what a rule does to the commands it matches.
type proxyAction int

const (
	delayReply  proxyAction = iota + 1 // the reply reaches the client d late (later replies wait behind it)
	dropReply                          // the command runs; its reply is dropped and the connection closed
	refuse                             // the connection is closed before the command is sent
	holdCommand                        // the command reaches Redis d late, whatever the client does meanwhile
	busy                               // the command is not sent; the client is answered a BUSY error, as Redis refuses while a script runs too long
)

// proxyRule acts on up to times commands that match (then lets them pass).
type proxyRule struct {
	match func(respCommand) bool
	act   proxyAction
	d     time.Duration
	times int
	hits  chan respCommand // one per command acted on
	// ran: one per command acted on that Redis has run (its reply read
	// by the proxy, whatever becomes of it), for a test to wait for a
	// command held back instead of sleeping.
	ran chan respCommand
}

// respCommand is one command as the client sent it.
type respCommand []string

func (c respCommand) name() string { return strings.ToUpper(c[0]) }

// script reports whether c runs a script (EVAL or EVALSHA), and its keys
// and arguments.
func (c respCommand) script() (keys, argv []string, ok bool) {
	if len(c) < 3 || (c.name() != "EVALSHA" && c.name() != "EVAL") {
		return nil, nil, false
	}
	n, err := strconv.Atoi(c[2])
	if err != nil || 3+n > len(c) {
		return nil, nil, false
	}
	return c[3 : 3+n], c[3+n:], true
}

// scriptOn reports whether c runs a script whose first key is name and
// among whose keys and arguments every one of has appears.
func (c respCommand) scriptOn(name string, has ...string) bool {
	keys, _, ok := c.script()
	if !ok || len(keys) == 0 || keys[0] != name {
		return false
	}
	for _, h := range has {
		found := false
		for _, a := range c[3:] {
			if a == h || (strings.HasSuffix(h, "*") && strings.HasPrefix(a, strings.TrimSuffix(h, "*"))) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// startRESPProxy listens on a free loopback port, forwarding to target; it
// is closed when the test ends.
func startRESPProxy(t *testing.T, target string) *respProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &respProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is where the proxy listens.
func (p *respProxy) Addr() string { return p.ln.Addr().String() }

// on adds a rule acting on the next times commands that match; its hits
// channel tells of each.
func (p *respProxy) on(times int, act proxyAction, d time.Duration, match func(respCommand) bool) *proxyRule {
	r := &proxyRule{match: match, act: act, d: d, times: times, hits: make(chan respCommand, times), ran: make(chan respCommand, times)}
	p.mu.Lock()
	p.rules = append(p.rules, r)
	p.mu.Unlock()
	return r
}

// actionFor is the rule for c, nil if none: the first rule that matches
// and has uses left takes one.
func (p *respProxy) actionFor(c respCommand) *proxyRule {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.rules {
		if r.times > 0 && r.match(c) {
			r.times--
			r.hits <- c
			return r
		}
	}
	return nil
}

func (p *respProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(client, server)
	}
}

// pendingReply is how to deliver the reply of a command sent to Redis.
type pendingReply struct {
	rule *proxyRule // nil: none acts on it
	cmd  respCommand
	raw  bool // the connection subscribed: copy everything from now on
	// refusal: the reply the proxy gives itself (the command was not sent).
	refusal []byte
}

// serve carries one connection: commands one by one to Redis, each reply
// back as its command's rule says.
func (p *respProxy) serve(client, server net.Conn) {
	defer p.wg.Done()
	pending := make(chan pendingReply, 1024)
	var replies sync.WaitGroup
	replies.Add(1)
	go func() {
		defer replies.Done()
		p.replies(client, server, pending)
	}()
	defer func() {
		close(pending)
		replies.Wait()
		p.drop(client)
		p.drop(server)
	}()
	in := bufio.NewReader(client)
	for {
		raw, err := readRESP(in)
		if err != nil {
			return
		}
		c := parseCommand(raw)
		if len(c) == 0 {
			return
		}
		r := p.actionFor(c)
		switch {
		case r == nil:
		case r.act == refuse:
			return
		case r.act == holdCommand:
			time.Sleep(r.d)
		case r.act == busy:
			pending <- pendingReply{refusal: []byte("-BUSY Redis is busy running a script (the test proxy)\r\n")}
			continue
		}
		if _, err := server.Write(raw); err != nil {
			return
		}
		switch c.name() {
		case "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE":
			pending <- pendingReply{raw: true}
			_, _ = io.Copy(server, in)
			return
		}
		pending <- pendingReply{rule: r, cmd: c}
	}
}

// replies delivers Redis's replies to client in order, as pending says,
// until pending is closed and drained (so that a command held back after
// its client left still runs before the connection to Redis closes).
func (p *respProxy) replies(client, server net.Conn, pending <-chan pendingReply) {
	in := bufio.NewReader(server)
	for r := range pending {
		if r.raw {
			_, _ = io.Copy(client, in)
			return
		}
		if r.refusal != nil {
			_, _ = client.Write(r.refusal)
			continue
		}
		reply, err := readRESP(in)
		if err != nil {
			return
		}
		if r.rule == nil {
			_, _ = client.Write(reply)
			continue
		}
		r.rule.ran <- r.cmd
		switch r.rule.act {
		case delayReply:
			time.Sleep(r.rule.d)
		case dropReply:
			p.drop(client)
			continue
		}
		_, _ = client.Write(reply)
	}
}

func (p *respProxy) drop(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *respProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// readRESP reads one whole RESP2 or RESP3 value and returns its bytes.
func readRESP(in *bufio.Reader) ([]byte, error) {
	var buf bytes.Buffer
	err := readRESPInto(in, &buf)
	return buf.Bytes(), err
}

func readRESPInto(in *bufio.Reader, buf *bytes.Buffer) error {
	line, err := in.ReadBytes('\n')
	if err != nil {
		return err
	}
	buf.Write(line)
	if len(line) < 3 {
		return errors.New("resp: short line")
	}
	body := string(line[1 : len(line)-2])
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return nil
	case '$', '!', '=':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return err // -1: null
		}
		_, err = io.CopyN(buf, in, int64(n)+2)
		return err
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return err
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range n {
			if err := readRESPInto(in, buf); err != nil {
				return err
			}
		}
		// An attribute precedes the value it describes.
		if line[0] == '|' {
			return readRESPInto(in, buf)
		}
		return nil
	}
	return fmt.Errorf("resp: unknown type %q", line[0])
}

// parseCommand reads a client's command: an array of bulk strings.
func parseCommand(raw []byte) respCommand {
	in := bufio.NewReader(bytes.NewReader(raw))
	line, err := in.ReadString('\n')
	if err != nil || len(line) < 3 || line[0] != '*' {
		return nil
	}
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	c := make(respCommand, 0, n)
	for range n {
		hdr, err := in.ReadString('\n')
		if err != nil || len(hdr) < 3 || hdr[0] != '$' {
			return nil
		}
		size, _ := strconv.Atoi(strings.TrimSpace(hdr[1:]))
		b := make([]byte, size+2)
		if _, err := io.ReadFull(in, b); err != nil {
			return nil
		}
		c = append(c, string(b[:size]))
	}
	return c
}

// TestRESPProxyActsOnTheCommandItIsAimedAt checks the proxy itself: each
// action meets its command, and the others pass untouched.
func TestRESPProxyActsOnTheCommandItIsAimedAt(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	// go-redis would retry a command whose reply was lost: not here.
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	direct := client(t, srv.Addr)
	ctx := ctxFor(t, 30*time.Second)
	is := func(name string) func(respCommand) bool {
		return func(c respCommand) bool { return c.name() == "SET" && c[1] == name }
	}

	p.on(1, delayReply, 300*time.Millisecond, is("delayed"))
	start := time.Now()
	require.NoError(t, rdb.Set(ctx, "delayed", 1, 0).Err())
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

	p.on(1, dropReply, 0, is("dropped"))
	require.Error(t, rdb.Set(ctx, "dropped", 1, 0).Err(), "the reply was dropped")
	require.Equal(t, "1", direct.Get(ctx, "dropped").Val(), "but the command ran")

	p.on(1, refuse, 0, is("refused"))
	require.Error(t, rdb.Set(ctx, "refused", 1, 0).Err())
	require.Equal(t, int64(0), direct.Exists(ctx, "refused").Val(), "the command never ran")

	held := p.on(1, holdCommand, 500*time.Millisecond, is("held"))
	impatient := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = impatient.Close() })
	require.Error(t, impatient.Set(ctx, "held", 1, 0).Err(), "the client gave up")
	<-held.hits
	require.Equal(t, int64(0), direct.Exists(ctx, "held").Val(), "not yet sent")
	require.Eventually(t, func() bool { return direct.Exists(ctx, "held").Val() == 1 }, 5*time.Second, 10*time.Millisecond,
		"sent after the hold, the client gone")
	require.NoError(t, rdb.Ping(ctx).Err(), "the proxy still serves")
}
