// Package remoting serves an actorlock runtime to actors of other
// processes over protoactor remote (gRPC), and hardens the remote of an
// actor system that talks to one. It is a package of its own so that a
// program that only locks does not link gRPC: see the README's "Remote
// actors".
package remoting

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/internal/ext"
)

// Config makes a runtime reachable by actors in other processes over
// protoactor remote (gRPC). See WithRemote and the README's "Remote
// actors".
type Config struct {
	// Addr is the host:port the node listens on. Default "127.0.0.1:0":
	// loopback, on a free port (actorkit.RemoteAddress tells which). The host must
	// be explicit: an empty or unspecified one (":8090", "0.0.0.0:8090",
	// "[::]:8090") listens on every interface, and is refused unless
	// AllInterfaces is set.
	Addr string
	// AllInterfaces allows an unspecified host in Addr. AdvertisedAddr is
	// then required: peers need an address to reach this node at.
	AllInterfaces bool
	// AdvertisedAddr is the host:port peers reach this node at, when it
	// differs from Addr (a container, a NAT, a proxy). It is the address in
	// the node's PIDs, so it must lead to Addr, whose port must then be
	// fixed, not 0. Default: the address listened on.
	AdvertisedAddr string
	// TLS, if set, encrypts the transport and authenticates both ends with
	// certificates. Default: plaintext, which any process that can reach
	// Addr may talk to.
	TLS *TLS
	// Name is the name the runtime's PID is registered under: peers send to
	// actor.NewPID(<node address>, Name). Default actorkit.DefaultRemoteName.
	Name string
}

// TLS is the mutual TLS of protoactor remote. Every node of a cluster
// (the runtime's, and every process whose actors talk to it) serves gRPC
// and dials the others, so each needs both configs: Server presents the
// node's certificate and requires and verifies the peer's
// (tls.RequireAndVerifyClientCert, ClientCAs); Client presents the same
// certificate (Certificates) and verifies the peer's (RootCAs). Peers dial
// the host of a PID's address, so a node's certificate must be valid for
// the host it advertises (an IP SAN for an IP address) and for both server
// and client authentication.
type TLS struct {
	Server *tls.Config
	Client *tls.Config
}

func (t *TLS) check() error {
	switch {
	case t.Server == nil || t.Client == nil:
		return fmt.Errorf("%w: remote TLS needs both a server and a client config", actorlock.ErrInvalidArgument)
	case t.Server.ClientAuth != tls.RequireAndVerifyClientCert:
		// Otherwise any process that can reach the port may send requests,
		// and stop or confuse actors through protoactor's system messages.
		return fmt.Errorf("%w: remote TLS server config must require and verify client certificates (tls.RequireAndVerifyClientCert)", actorlock.ErrInvalidArgument)
	case len(t.Server.Certificates) == 0 && t.Server.GetCertificate == nil:
		return fmt.Errorf("%w: remote TLS server config has no certificate", actorlock.ErrInvalidArgument)
	case len(t.Client.Certificates) == 0 && t.Client.GetClientCertificate == nil:
		return fmt.Errorf("%w: remote TLS client config has no certificate, which peers require", actorlock.ErrInvalidArgument)
	case t.Client.InsecureSkipVerify:
		return fmt.Errorf("%w: remote TLS client config must verify its peers (InsecureSkipVerify)", actorlock.ErrInvalidArgument)
	}
	return nil
}

// WithRemote starts protoactor remote on the runtime's own actor system,
// before its actors (so their PIDs carry the node's address), registers the
// runtime's PID under rc.Name, and stops the remote at Close. It cannot be
// combined with actorkit.WithActorSystem: on your own system, configure
// and start remote yourself (see Options), and stop it yourself after
// Close; actorkit.WithName then gives the runtime's PID its well-known
// name.
func WithRemote(rc Config) actorlock.Option {
	s := ext.Server{Name: rc.Name}
	if s.Name == "" {
		s.Name = actorkit.DefaultRemoteName
	}
	if _, _, err := rc.listenAddr(); err != nil {
		s.Err = fmt.Errorf("%w: %w", actorlock.ErrInvalidArgument, err)
	} else if rc.TLS != nil {
		s.Err = rc.TLS.check()
	}
	s.Start = func(sys *actor.ActorSystem) (func(context.Context) error, error) {
		ends := &streamEnds{}
		r, err := start(sys, rc, ends)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			ends.settle(ctx)
			return stop(ctx, r)
		}, nil
	}
	return ext.Option(s).(actorlock.Option)
}

// listenAddr is the host (bracketed if IPv6: protoactor joins host and port
// with a bare colon) and port to listen on.
func (rc Config) listenAddr() (string, int, error) {
	addr := rc.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("remote address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("remote address %q: bad port", addr)
	}
	ip := net.ParseIP(host)
	everywhere := host == "" || (ip != nil && ip.IsUnspecified())
	switch {
	case everywhere && !rc.AllInterfaces:
		return "", 0, fmt.Errorf("remote address %q listens on every interface; name one (\"127.0.0.1:0\"), or set AllInterfaces", addr)
	case everywhere && rc.AdvertisedAddr == "":
		return "", 0, fmt.Errorf("remote address %q listens on every interface: set AdvertisedAddr, the address peers reach this node at", addr)
	case rc.AdvertisedAddr != "" && port == 0:
		return "", 0, fmt.Errorf("remote AdvertisedAddr %q needs a fixed port in Addr, not 0", rc.AdvertisedAddr)
	}
	if rc.AdvertisedAddr != "" {
		if _, _, err := net.SplitHostPort(rc.AdvertisedAddr); err != nil {
			return "", 0, fmt.Errorf("remote AdvertisedAddr %q: %w", rc.AdvertisedAddr, err)
		}
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host, port, nil
}

// Options are the protoactor remote options for an actor system that
// talks to actorlock runtimes, or serves one: remote.Configure(host, port,
// opts...). tlsCfg nil means plaintext. They also harden the node's gRPC
// server against its peers (see filterStream): protoactor remote lets any
// connected peer stop any actor whose id it knows, and crashes the process
// on some malformed input. WithRemote uses them.
func Options(sys *actor.ActorSystem, tlsCfg *TLS) ([]remote.ConfigOption, error) {
	return options(sys, tlsCfg, nil)
}

// options is Options, noting in ends (if not nil) when inbound streams end.
func options(sys *actor.ActorSystem, tlsCfg *TLS, ends *streamEnds) ([]remote.ConfigOption, error) {
	if sys == nil {
		return nil, fmt.Errorf("%w: nil actor system", actorlock.ErrInvalidArgument)
	}
	server := []grpc.ServerOption{
		grpc.ChainStreamInterceptor(filterStream(sys, ends)),
		grpc.ChainUnaryInterceptor(refuseUnary),
	}
	dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if tlsCfg != nil {
		if err := tlsCfg.check(); err != nil {
			return nil, err
		}
		server = append(server, grpc.Creds(credentials.NewTLS(tlsCfg.Server.Clone())))
		dial = []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg.Client.Clone()))}
	}
	return []remote.ConfigOption{remote.WithServerOptions(server...), remote.WithDialOptions(dial...)}, nil
}

// refuseUnary answers protoactor's unary RPCs (ListProcesses,
// GetProcessDiagnostics), which it implements with panic("implement me"):
// an unrecovered panic in a gRPC handler would kill the process.
func refuseUnary(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
	return nil, status.Error(codes.Unimplemented, "actorlock: not served")
}

// filterStream drops, from every batch a peer sends, the envelopes that
// protoactor would act on unchecked:
//   - Stop and PoisonPill: they stop whatever actor they name (a lock
//     actor stopping releases every lock it serves, the manager's stop
//     disables the runtime);
//   - a Terminated naming an actor of this node: only this node knows when
//     its own actors stop, and the manager would otherwise forget a live
//     lock actor;
//   - anything not serialized as protobuf (protoactor's JSON serializer
//     turns unknown types into untyped payloads);
//   - envelopes whose indexes fall outside the batch's tables, on which
//     protoactor's reader panics and kills the process;
//   - messages to a supervision guardian (ids "guardian$<n>", sequential
//     like every id): protoactor panics on any message to one, killing
//     the process.
//
// It also notes in ends (if not nil) when a stream ended.
func filterStream(sys *actor.ActorSystem, ends *streamEnds) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		err := handler(srv, &filteredStream{ServerStream: ss, sys: sys})
		if ends != nil {
			ends.last.Store(time.Now().UnixNano())
		}
		return err
	}
}

// streamEnds is when the last inbound stream ended. protoactor's reader
// closes a stream's disconnect channel when the stream ends, and removes
// the stream from the set a graceful Shutdown sends on only afterwards, on
// another goroutine: a Shutdown in between sends on the closed channel
// (the panic stop recovers from; under the race detector, a reported
// race). Close therefore lets the last stream to end settle first.
type streamEnds struct{ last atomic.Int64 }

// streamSettle is how long after a stream ended its removal is taken to
// have happened (it follows at once on an idle goroutine).
const streamSettle = 100 * time.Millisecond

// settle waits until the last stream ended streamSettle ago, or ctx ends.
func (e *streamEnds) settle(ctx context.Context) {
	last := e.last.Load()
	if last == 0 {
		return
	}
	wait := time.Until(time.Unix(0, last).Add(streamSettle))
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

type filteredStream struct {
	grpc.ServerStream
	sys *actor.ActorSystem
}

func (s *filteredStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if rm, ok := m.(*remote.RemoteMessage); ok {
		if b := rm.GetMessageBatch(); b != nil {
			b.Envelopes = slices.DeleteFunc(b.Envelopes, func(e *remote.MessageEnvelope) bool { return !s.admit(b, e) })
		}
	}
	return nil
}

// protobufSerializer is protoactor remote's serializer id of protobuf.
const protobufSerializer = 0

func (s *filteredStream) admit(b *remote.MessageBatch, e *remote.MessageEnvelope) bool {
	switch {
	case e == nil, e.SerializerId != protobufSerializer,
		e.TypeId < 0 || int(e.TypeId) >= len(b.TypeNames),
		e.Target < 0 || int(e.Target) >= len(b.Targets),
		e.Sender < 0 || int(e.Sender) > len(b.Senders),
		e.Sender > 0 && b.Senders[e.Sender-1] == nil:
		return false
	}
	if p, ok := s.sys.ProcessRegistry.GetLocal(b.Targets[e.Target]); ok && isGuardian(p) {
		return false
	}
	switch b.TypeNames[e.TypeId] {
	case stopType, poisonType:
		return false
	case terminatedType:
		var t actor.Terminated
		if proto.Unmarshal(e.MessageData, &t) != nil || t.Who == nil {
			return false
		}
		return t.Who.Address != s.sys.Address() && t.Who.Address != ext.LocalAddress
	}
	return true
}

// isGuardian reports whether p is a supervision guardian, whose
// SendUserMessage panics. protoactor does not export its type.
func isGuardian(p actor.Process) bool {
	return reflect.TypeOf(p).String() == "*actor.guardianProcess"
}

var (
	stopType       = string(proto.MessageName(&actor.Stop{}))
	poisonType     = string(proto.MessageName(&actor.PoisonPill{}))
	terminatedType = string(proto.MessageName(&actor.Terminated{}))
)

// start starts protoactor remote on sys as rc says.
func start(sys *actor.ActorSystem, rc Config, ends *streamEnds) (r *remote.Remote, err error) {
	host, port, err := rc.listenAddr()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", actorlock.ErrInvalidArgument, err)
	}
	opts, err := options(sys, rc.TLS, ends)
	if err != nil {
		return nil, err
	}
	if rc.AdvertisedAddr != "" {
		opts = append(opts, remote.WithAdvertisedHost(rc.AdvertisedAddr))
	}
	// protoactor dials a peer it must send to up to MaxRetryCount times,
	// sleeping 2 s after each failure inside the connection's actor, which
	// Close must wait for. A peer that cannot be reached gains nothing from
	// 5 attempts (its requests come in on its own connection, and its
	// renewals decide whether it keeps its locks): 2 bound that wait to 4 s.
	opts = append(opts, func(c *remote.Config) { c.MaxRetryCount = 2 })
	r = remote.NewRemote(sys, remote.Configure(host, port, opts...))
	// protoactor panics when it cannot listen (the port is taken, the host
	// is not ours): that is an error here, not a crash.
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("actorlock: start remote on %s:%d: %v", host, port, p)
		}
	}()
	r.Start()
	return r, nil
}

// remoteDrainTime bounds the graceful part of stopping the remote: peers
// are told to disconnect, and the server waits for their streams to end. A
// frozen or vanished peer never ends its stream, so after this the server
// is stopped hard.
const remoteDrainTime = time.Second

// remoteShutdowner is the part of *remote.Remote that stop uses.
type remoteShutdowner interface{ Shutdown(graceful bool) }

// stop stops r, gracefully for up to remoteDrainTime (or ctx), then
// hard; it returns once protoactor's endpoints and gRPC server are down,
// or with an error when ctx ends first.
func stop(ctx context.Context, r remoteShutdowner) error {
	done := make(chan struct{})
	var panicErr error
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				// The endpoint actors were stopped before the panic could
				// happen; what the graceful path skipped is telling the
				// remaining peers and draining their streams. Cut them.
				r.Shutdown(false)
				if !isShutdownRace(p) {
					panicErr = fmt.Errorf("stopping remote: panic: %v", p)
				}
			}
		}()
		r.Shutdown(true)
	}()
	bound := time.NewTimer(remoteDrainTime)
	defer bound.Stop()
	select {
	case <-done:
		return panicErr
	case <-bound.C:
	case <-ctx.Done():
	}
	// gRPC allows Stop during GracefulStop: it cuts the remaining streams.
	r.Shutdown(false)
	select {
	case <-done:
		return panicErr
	case <-ctx.Done():
		return fmt.Errorf("stopping remote: %w", context.Cause(ctx))
	}
}

// isShutdownRace tells the panic of a protoactor remote race from others:
// a graceful Shutdown sends a disconnect notice on each inbound stream's
// channel, which the stream's reader closes when the stream ends (a peer
// leaving, or killed) a moment before removing it from the set Shutdown
// ranges over. A stream ending in that moment panics Shutdown with a send
// on a closed channel; nothing is corrupted, the peer is already gone.
func isShutdownRace(p any) bool {
	err, ok := p.(runtime.Error)
	return ok && err.Error() == "send on closed channel"
}
