package tests

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/remoting"
)

// Worker modes of the remote tests: processes whose actors lock with the
// test process's runtime over protoactor remote. Their runtime (made by
// runWorker) is unused: they talk to the test's runtime by message only.
func init() {
	workerModes["remote-owner"] = workerRemoteOwner
	workerModes["remote-spoof"] = workerRemoteSpoof
	workerModes["remote-validate"] = workerRemoteValidate
}

// out serializes the lines a worker prints (actors print concurrently).
var out sync.Mutex

func say(format string, args ...any) {
	out.Lock()
	defer out.Unlock()
	fmt.Printf(format+"\n", args...)
}

// remoteNode starts an actor system with remote on 127.0.0.1, a free port
// (NODE_PORT: that one; NODE_ADVERTISED: the address it advertises) and
// returns it with the PID of the test's runtime (SERVER_ADDR,
// SERVER_NAME). TLS: TLS_CA, TLS_CERT and TLS_KEY name PEM files for mutual
// TLS; TLS_NOCERT=1 dials with TLS but presents no certificate.
func remoteNode() (*actor.ActorSystem, *actor.PID, error) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	var opts []remote.ConfigOption
	switch {
	case os.Getenv("TLS_NOCERT") == "1":
		pool, err := loadPool(os.Getenv("TLS_CA"))
		if err != nil {
			return nil, nil, err
		}
		opts = []remote.ConfigOption{remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))}
	case os.Getenv("TLS_CA") != "":
		pool, err := loadPool(os.Getenv("TLS_CA"))
		if err != nil {
			return nil, nil, err
		}
		cert, err := tls.LoadX509KeyPair(os.Getenv("TLS_CERT"), os.Getenv("TLS_KEY"))
		if err != nil {
			return nil, nil, err
		}
		opts, err = remoting.Options(sys, &remoting.TLS{
			Server: &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool},
			Client: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool},
		})
		if err != nil {
			return nil, nil, err
		}
	default:
		var err error
		if opts, err = remoting.Options(sys, nil); err != nil {
			return nil, nil, err
		}
	}
	port := envInt("NODE_PORT")
	if adv := os.Getenv("NODE_ADVERTISED"); adv != "" {
		opts = append(opts, remote.WithAdvertisedHost(adv))
	}
	remote.NewRemote(sys, remote.Configure("127.0.0.1", port, opts...)).Start()
	name := os.Getenv("SERVER_NAME")
	if name == "" {
		name = actorkit.DefaultRemoteName
	}
	return sys, actor.NewPID(os.Getenv("SERVER_ADDR"), name), nil
}

func loadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", path)
	}
	return pool, nil
}

// workerRemoteOwner runs an owner actor that acquires LOCK_NAME by message
// from the test's runtime and holds it until killed. It prints:
//
//	NODE <address>
//	OWNER <pid address> <pid id>
//	ACQUIRED <owner token> <owner id> <fencing token> <ttl ms>, or REFUSED <code>
//	NO_RESPONSE                       (none within RESPONSE_TIMEOUT_MS)
//	LOST <reason>                     a LockLost came
//	RENEWFAIL <code>                  its keeper's renewal was refused
//	GOT <type> <code>                 any other response (say, to a spoofed request)
//	STOPPED                           the owner actor stopped (STOP_OWNER_MS)
//
// LEASE_MS asks for a fixed lease. KEEP=0 runs no keeper (the owner sends
// no RenewRequest); KEEP_LEASE=0
// gives the keeper no lease (it learns it); SEPARATE_KEEPER=1
// runs the keeper outside the owner actor, so it outlives it; STOP_OWNER_MS
// stops the owner actor that long after acquiring.
func workerRemoteOwner(*actorlock.Runtime, redis.UniversalClient) int {
	sys, server, err := remoteNode()
	if err != nil {
		fmt.Fprintln(os.Stderr, "remote owner:", err)
		return 1
	}
	say("NODE %s", sys.Address())
	timeout := time.Duration(envInt("RESPONSE_TIMEOUT_MS")) * time.Millisecond
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	stopAfter := time.Duration(envInt("STOP_OWNER_MS")) * time.Millisecond
	answered := make(chan struct{})
	var separate *actor.PID
	if os.Getenv("SEPARATE_KEEPER") == "1" {
		separate = sys.Root.Spawn(actorkit.KeeperProps())
	}
	var asked time.Time
	owner := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			say("OWNER %s %s", ctx.Self().Address, ctx.Self().Id)
			asked = time.Now()
			ctx.Request(server, &messages.AcquireRequest{
				RequestId: "a", Name: os.Getenv("LOCK_NAME"), Kind: messages.Kind_KIND_LOCK,
				WaitMs: int64(envInt("WAIT_MS")), OwnerToken: os.Getenv("OWNER_TOKEN"),
				LeaseMs: int64(envInt("LEASE_MS")),
			})
		case *actor.Stopped:
			say("STOPPED")
		case *messages.AcquireResponse:
			if m.RequestId != "a" {
				say("GOT AcquireResponse %v", m.GetError().GetCode())
				return
			}
			close(answered)
			if !m.Acquired {
				say("REFUSED %v", m.GetError().GetCode())
				return
			}
			say("ACQUIRED %s %s %d %d", m.OwnerToken, m.Owner, m.FencingToken, m.TtlMs)
			keep := &actorkit.Keep{Runtime: server, Name: os.Getenv("LOCK_NAME"), Kind: messages.Kind_KIND_LOCK,
				OwnerToken: m.OwnerToken, Lease: time.Duration(m.TtlMs) * time.Millisecond, Since: asked}
			if os.Getenv("KEEP_LEASE") == "0" {
				keep.Lease = 0 // learnt from the runtime's RenewResponses
			}
			switch {
			case separate != nil:
				ctx.Send(separate, keep)
			case os.Getenv("KEEP") != "0":
				ctx.Send(ctx.Spawn(actorkit.KeeperProps()), keep)
			}
			if stopAfter > 0 {
				self := ctx.Self()
				time.AfterFunc(stopAfter, func() { sys.Root.Stop(self) })
			}
		case *messages.LockLost:
			say("LOST %s", m.Reason)
		case *messages.RenewResponse:
			say("RENEWFAIL %v", m.GetError().GetCode())
		case proto.Message:
			say("GOT %s %v", m.ProtoReflect().Descriptor().Name(), errorCode(m))
		}
	}))
	say("READY")
	select {
	case <-answered:
	case <-time.After(timeout):
		say("NO_RESPONSE")
	}
	_ = owner
	select {}
}

// errorCode is the code of a response's error field, if it has one.
func errorCode(m proto.Message) messages.ErrorCode {
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName("error")
	if fd == nil || !r.Has(fd) {
		return messages.ErrorCode_ERROR_CODE_UNSPECIFIED
	}
	return r.Get(fd).Message().Interface().(*messages.Error).GetCode()
}

// asker sends requests with Context.Request (so it is the sender) and
// passes every response on; sendAs claims another actor as the sender.
type asker struct {
	pid     *actor.PID
	replies chan proto.Message
}

type (
	askMsg struct {
		to  *actor.PID
		msg proto.Message
		as  *actor.PID
	}
)

func spawnAsker(sys *actor.ActorSystem) *asker {
	a := &asker{replies: make(chan proto.Message, 16)}
	a.pid = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *askMsg:
			if m.as != nil {
				ctx.RequestWithCustomSender(m.to, m.msg, m.as)
				return
			}
			ctx.Request(m.to, m.msg)
		case proto.Message:
			a.replies <- m
		}
	}))
	return a
}

func (a *asker) ask(sys *actor.ActorSystem, to *actor.PID, msg proto.Message) proto.Message {
	sys.Root.Send(a.pid, &askMsg{to: to, msg: msg})
	select {
	case r := <-a.replies:
		return r
	case <-time.After(5 * time.Second):
		return nil
	}
}

// step prints "STEP <label> <code> <released> <error message>".
func step(label string, resp proto.Message) {
	if resp == nil {
		say("STEP %s NO_RESPONSE", label)
		return
	}
	released := false
	msg := ""
	switch r := resp.(type) {
	case *messages.ReleaseResponse:
		released, msg = r.Released, r.GetError().GetMessage()
	case *messages.RenewResponse:
		msg = r.GetError().GetMessage()
	case *messages.CancelResponse:
		msg = r.GetError().GetMessage()
	case *messages.AcquireResponse:
		msg = r.GetError().GetMessage()
	}
	say("STEP %s %v %v %s", label, errorCode(resp), released, msg)
}

// workerRemoteSpoof is a second remote actor that goes after the lock
// LOCK_NAME another process's actor holds (owner id VICTIM_OWNER, PID
// VICTIM_ADDR/VICTIM_ID): release, renew and cancel without the owner's
// token or with a wrong one, naming the owner id, with the victim's PID as
// sender; then tries to stop the runtime's PID. With GOOD_TOKEN, it only
// releases with that token (the owner's, passed on by the test). It prints
// a STEP line for each (see step).
func workerRemoteSpoof(*actorlock.Runtime, redis.UniversalClient) int {
	sys, server, err := remoteNode()
	if err != nil {
		fmt.Fprintln(os.Stderr, "remote spoof:", err)
		return 1
	}
	a := spawnAsker(sys)
	name, kind := os.Getenv("LOCK_NAME"), messages.Kind_KIND_LOCK
	if good := os.Getenv("GOOD_TOKEN"); good != "" {
		step("release-good", a.ask(sys, server, &messages.ReleaseRequest{RequestId: "r-good", Name: name, Kind: kind, OwnerToken: good}))
		say("DONE")
		select {}
	}
	wrong := actorkit.NewOwnerToken()
	for _, tok := range []struct{ label, token string }{{"none", ""}, {"wrong", wrong}} {
		step("release-"+tok.label, a.ask(sys, server, &messages.ReleaseRequest{RequestId: "r-" + tok.label, Name: name, Kind: kind, OwnerToken: tok.token}))
		step("renew-"+tok.label, a.ask(sys, server, &messages.RenewRequest{RequestId: "n-" + tok.label, Name: name, Kind: kind, OwnerToken: tok.token}))
		step("cancel-"+tok.label, a.ask(sys, server, &messages.CancelRequest{RequestId: "a", Name: name, Kind: kind, OwnerToken: tok.token}))
	}
	victimOwner := os.Getenv("VICTIM_OWNER")
	//lint:ignore SA1019 the deprecated field must be refused
	step("release-named", a.ask(sys, server, &messages.ReleaseRequest{RequestId: "r-named", Name: name, Kind: kind, Owner: victimOwner}))
	//lint:ignore SA1019 the deprecated field must be refused
	step("acquire-named", a.ask(sys, server, &messages.AcquireRequest{RequestId: "a-named", Name: name, Kind: kind, Owner: victimOwner}))

	// As the victim: the replies go to the victim, who prints them.
	victim := actor.NewPID(os.Getenv("VICTIM_ADDR"), os.Getenv("VICTIM_ID"))
	for _, tok := range []string{"", wrong} {
		sys.Root.Send(a.pid, &askMsg{to: server, as: victim, msg: &messages.ReleaseRequest{RequestId: "as-victim", Name: name, Kind: kind, OwnerToken: tok}})
	}
	say("STEP as-victim sent")

	// Stopping the runtime's PID would end every lock it serves.
	sys.Root.Send(server, &actor.PoisonPill{})
	sys.Root.Stop(server)
	time.Sleep(300 * time.Millisecond)
	say("STEP stop sent")
	say("DONE")
	select {}
}

// workerRemoteValidate sends malformed requests to the test's runtime and
// prints "CASE <label> <code> <request id echoed>" for each answer.
func workerRemoteValidate(*actorlock.Runtime, redis.UniversalClient) int {
	sys, server, err := remoteNode()
	if err != nil {
		fmt.Fprintln(os.Stderr, "remote validate:", err)
		return 1
	}
	a := spawnAsker(sys)
	lock := messages.Kind_KIND_LOCK
	token := actorkit.NewOwnerToken()
	cases := []struct {
		label string
		msg   proto.Message
	}{
		{"kind-unspecified", &messages.AcquireRequest{RequestId: "1", Name: "v", Kind: messages.Kind_KIND_UNSPECIFIED}},
		{"kind-unknown", &messages.AcquireRequest{RequestId: "2", Name: "v", Kind: messages.Kind(42)}},
		{"name-empty", &messages.AcquireRequest{RequestId: "3", Name: "", Kind: lock}},
		{"name-oversized", &messages.AcquireRequest{RequestId: "4", Name: strings.Repeat("n", 64<<10+1), Kind: lock}},
		{"wait-negative", &messages.AcquireRequest{RequestId: "5", Name: "v", Kind: lock, WaitMs: -1}},
		{"lease-negative", &messages.AcquireRequest{RequestId: "6", Name: "v", Kind: lock, LeaseMs: -1}},
		{"lease-overflow", &messages.AcquireRequest{RequestId: "7", Name: "v", Kind: lock, LeaseMs: 1 << 62}},
		{"token-short", &messages.AcquireRequest{RequestId: "8", Name: "v", Kind: lock, OwnerToken: token[:30]}},
		{"token-not-hex", &messages.AcquireRequest{RequestId: "9", Name: "v", Kind: lock, OwnerToken: "zz" + token[2:]}},
		{"token-oversized", &messages.AcquireRequest{RequestId: "10", Name: "v", Kind: lock, OwnerToken: strings.Repeat(token, 20)}},
		{"request-id-oversized", &messages.AcquireRequest{RequestId: strings.Repeat("i", 1000), Name: "v", Kind: lock}},
		//lint:ignore SA1019 the deprecated field must be refused
		{"owner-named", &messages.AcquireRequest{RequestId: "11", Name: "v", Kind: lock, Owner: "somebody:1"}},
		{"release-token-malformed", &messages.ReleaseRequest{RequestId: "12", Name: "v", Kind: lock, OwnerToken: "xyz"}},
		{"release-kind-unknown", &messages.ReleaseRequest{RequestId: "13", Name: "v", Kind: messages.Kind(42), OwnerToken: token}},
		{"renew-token-malformed", &messages.RenewRequest{RequestId: "14", Name: "v", Kind: lock, OwnerToken: "xyz"}},
		{"renew-name-empty", &messages.RenewRequest{RequestId: "15", Name: "", Kind: lock, OwnerToken: token}},
		{"cancel-token-malformed", &messages.CancelRequest{RequestId: "16", Name: "v", Kind: lock, OwnerToken: "xyz"}},
		{"offer-payload-oversized", &messages.OfferRequest{RequestId: "17", Name: "q", Payload: make([]byte, 1<<20+1)}},
		{"offer-delay-negative", &messages.OfferRequest{RequestId: "18", Name: "q", Payload: []byte("x"), DelayMs: -1}},
	}
	for _, c := range cases {
		resp := a.ask(sys, server, c.msg)
		if resp == nil {
			say("CASE %s NO_RESPONSE", c.label)
			continue
		}
		id := resp.ProtoReflect().Get(resp.ProtoReflect().Descriptor().Fields().ByName("request_id")).String()
		say("CASE %s %v %d", c.label, errorCode(resp), len(id))
	}
	say("DONE")
	select {}
}
