package remoting

import (
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/actorlock/actorlock/messages"
)

// wireStream hands RecvMsg the fuzz input as what a peer sent.
type wireStream struct {
	grpc.ServerStream
	in []byte
}

func (w *wireStream) RecvMsg(m any) error { return proto.Unmarshal(w.in, m.(proto.Message)) }

func batchSeed(f *testing.F, b *remote.MessageBatch) {
	in, err := proto.Marshal(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}})
	require.NoError(f, err)
	f.Add(in)
}

// FuzzEnvelopeFilter feeds arbitrary bytes to the remote stream filter as
// a peer's message: it never panics, and every envelope it lets through is
// one protoactor's reader can index and deserialize without panicking,
// and is not a Stop, a PoisonPill or a Terminated naming a local actor.
// Seeds in testdata/fuzz/FuzzEnvelopeFilter.
func FuzzEnvelopeFilter(f *testing.F) {
	acquire, _ := proto.Marshal(&messages.AcquireRequest{Name: "n", RequestId: "r"})
	stop, _ := proto.Marshal(&actor.Stop{})
	term, _ := proto.Marshal(&actor.Terminated{Who: actor.NewPID("nonhost", "x")})
	batchSeed(f, &remote.MessageBatch{TypeNames: []string{string(proto.MessageName(&messages.AcquireRequest{}))}, Targets: []string{"t"},
		Senders: []*actor.PID{actor.NewPID("peer:1", "p")}, Envelopes: []*remote.MessageEnvelope{{MessageData: acquire, Sender: 1, SenderRequestId: 3}}})
	batchSeed(f, &remote.MessageBatch{TypeNames: []string{stopType, terminatedType}, Targets: []string{"t"},
		Envelopes: []*remote.MessageEnvelope{{MessageData: stop}, {MessageData: term, TypeId: 1}, {TypeId: 2, Target: 5, Sender: 9}}})
	batchSeed(f, &remote.MessageBatch{TypeNames: []string{"x"}, Targets: []string{"t"}, Senders: []*actor.PID{nil},
		Envelopes: []*remote.MessageEnvelope{nil, {Sender: 1}, {SerializerId: 1}, {TypeId: -1, Target: -1, Sender: -1}}})
	f.Add([]byte{0x0a, 0x02, 0x08, 0x01})
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	f.Fuzz(func(t *testing.T, in []byte) {
		s := &filteredStream{ServerStream: &wireStream{in: in}, sys: sys}
		var m remote.RemoteMessage
		if s.RecvMsg(&m) != nil {
			return
		}
		b := m.GetMessageBatch()
		if b == nil {
			return
		}
		for _, e := range b.Envelopes {
			// What protoactor's endpoint reader does with an envelope.
			require.NotNil(t, e)
			require.Zero(t, e.SerializerId)
			require.True(t, e.TypeId >= 0 && int(e.TypeId) < len(b.TypeNames))
			require.True(t, e.Target >= 0 && int(e.Target) < len(b.Targets))
			if e.Sender != 0 {
				require.True(t, e.Sender > 0 && int(e.Sender) <= len(b.Senders))
				require.NotNil(t, b.Senders[e.Sender-1])
				_ = proto.Clone(b.Senders[e.Sender-1])
			}
			name := b.TypeNames[e.TypeId]
			require.NotEqual(t, stopType, name)
			require.NotEqual(t, poisonType, name)
			msg, err := remote.Deserialize(e.MessageData, name, e.SerializerId)
			if err != nil {
				continue
			}
			if term, ok := msg.(*actor.Terminated); ok {
				require.NotNil(t, term.Who)
				require.NotEqual(t, sys.Address(), term.Who.Address)
			}
		}
	})
}
