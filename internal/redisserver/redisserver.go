// Package redisserver runs real redis-server processes on free loopback
// ports, for actorlock's tests, benchmarks and demo, and injects faults into
// them: stop, kill, pause (SIGSTOP), resume and restart on the same port.
// StartTLS runs a TLS-only server with certificates generated for it.
package redisserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoBinary: redis-server is not installed.
var ErrNoBinary = errors.New("redis-server not found in PATH; install it (Debian/Ubuntu: sudo apt-get install -y redis-server; macOS: brew install redis)")

// Server is one redis-server process on 127.0.0.1.
type Server struct {
	Addr string // 127.0.0.1:port
	Port int
	// Certs of a TLS-only server (StartTLS), nil for a plain one.
	Certs *Certs

	bin      string
	dir      string
	args     []string
	sentinel string // config file of a sentinel; "" for a data server

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	output *tailBuffer
}

// Binary returns the path of redis-server, or ErrNoBinary.
func Binary() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", ErrNoBinary
	}
	return p, nil
}

// Start runs a redis-server without persistence on a free loopback port.
// extra are further config directives, e.g. "--appendonly", "yes".
func Start(extra ...string) (*Server, error) {
	return start("actorlock-redis-", nil, extra)
}

// start runs a data server in a new directory named after prefix; certs,
// if not nil, makes the TLS certificates there and makes it a TLS server.
func start(prefix string, certs func(dir string) (*Certs, error), extra []string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	var c *Certs
	if certs != nil {
		if c, err = certs(dir); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("redisserver: certificates: %w", err)
		}
	}
	var last error
	// The port is free when picked but could be taken before redis binds
	// it: try a few.
	for range 5 {
		port, err := FreePort()
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Port: port, Certs: c, bin: bin, dir: dir, args: extra}
		if last = s.start(); last == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, last
}

// StartReplica runs a redis-server replicating master.
func StartReplica(master *Server, extra ...string) (*Server, error) {
	return Start(append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(master.Port)}, extra...)...)
}

// StartSentinel runs a Redis Sentinel watching master under masterName,
// with quorum 1 and a short failure detection (downAfter), so that tests can
// make it fail over.
func StartSentinel(master *Server, masterName string, downAfter time.Duration) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "actorlock-sentinel-")
	if err != nil {
		return nil, err
	}
	conf := dir + "/sentinel.conf"
	body := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds %s %d\n"+
		"sentinel failover-timeout %s 5000\n"+
		"sentinel parallel-syncs %s 1\n",
		masterName, master.Port, masterName, downAfter.Milliseconds(), masterName, masterName)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		return nil, err
	}
	var last error
	for range 5 {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Port: port, bin: bin, dir: dir, sentinel: conf}
		if last = s.start(); last == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, last
}

// FreePort is a loopback TCP port free at the time of the call.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start() error {
	listen := []string{"--port", strconv.Itoa(s.Port)}
	if s.Certs != nil {
		listen = s.tlsArgs()
	}
	args := append(append(listen,
		"--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no",
		"--dir", s.dir, "--loglevel", "warning", "--daemonize", "no",
	), s.args...)
	if s.sentinel != "" {
		// A sentinel rewrites its config file, so it has one of its own.
		args = append([]string{s.sentinel, "--sentinel"}, args[:2]...)
		args = append(args, "--bind", "127.0.0.1", "--dir", s.dir, "--loglevel", "warning")
	}
	cmd := exec.Command(s.bin, args...)
	cmd.SysProcAttr = procAttr()
	out := &tailBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redisserver: start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited, s.output = cmd, exited, out
	s.mu.Unlock()
	if err := s.waitReady(exited, 10*time.Second); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("redisserver: %s did not start: %w; output: %s", s.Addr, err, out.String())
	}
	return nil
}

// waitReady polls PING until the server answers PONG.
func (s *Server) waitReady(exited chan struct{}, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("process exited")
		default:
		}
		if s.ping() == nil {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return errors.New("no PONG in time")
}

func (s *Server) ping() error {
	c, err := s.dial(200 * time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

func (s *Server) signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("redisserver: not running")
	}
	return s.cmd.Process.Signal(sig)
}

func (s *Server) wait(timeout time.Duration) error {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	select {
	case <-exited:
		s.mu.Lock()
		s.cmd = nil
		s.mu.Unlock()
		return nil
	case <-time.After(timeout):
		return errors.New("redisserver: process did not exit")
	}
}

// Stop shuts the server down gracefully (SIGTERM) and waits for it.
func (s *Server) Stop() error {
	_ = s.Resume() // a paused process cannot handle SIGTERM
	if err := s.signal(syscall.SIGTERM); err != nil {
		return err
	}
	return s.wait(10 * time.Second)
}

// Kill ends the server at once (SIGKILL), as a crash would.
func (s *Server) Kill() error {
	if err := s.signal(syscall.SIGKILL); err != nil {
		return err
	}
	return s.wait(10 * time.Second)
}

// Pause freezes the server (SIGSTOP): connections stay open, nothing answers.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

// Restart starts a stopped or killed server again on the same port, with
// the data its Dir holds (the AOF if enabled, else a dump.rdb left by SAVE);
// without persistence or a SAVE it comes back empty.
func (s *Server) Restart() error {
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		if err := s.Kill(); err != nil {
			return err
		}
	}
	return s.start()
}

// Dir is the server's working directory, where it writes its RDB snapshot
// (dump.rdb) and AOF (appendonlydir/). Restart keeps it, so a server with
// persistence comes back with what these files hold; replacing them while
// the server is stopped restarts it from older data, as a crash that lost
// the last writes or a restore from a backup would.
func (s *Server) Dir() string { return s.dir }

// Close kills the server if it runs and removes its directory.
func (s *Server) Close() error {
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		_ = s.Resume()
		_ = s.Kill()
	}
	return os.RemoveAll(s.dir)
}

// Output is the end of what the server printed.
func (s *Server) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.output == nil {
		return ""
	}
	return s.output.String()
}

// WaitReady waits up to ctx for the server to answer PING.
func (s *Server) WaitReady(ctx context.Context) error {
	for {
		if s.ping() == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// tailBuffer keeps the last 64 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - 64<<10; over > 0 {
		b.buf = b.buf[over:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
