package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// gateway gives a runtime's PID a well-known name, so that actors in other
// processes can address it as actor.NewPID(<node address>, name) without
// being told the manager's generated id. It forwards every message of the
// protocol to the manager, keeping the sender, and nothing else: lifecycle
// messages stay its own.
type gateway struct{ manager *actor.PID }

func (g *gateway) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(proto.Message); ok && m.ProtoReflect().Descriptor().ParentFile().Package() == protocolPackage {
		ctx.Forward(g.manager)
	}
}

// SpawnGateway registers manager under name in sys. Stop the returned PID
// (before the runtime's actors) to unregister it.
func SpawnGateway(sys *actor.ActorSystem, name string, manager *actor.PID) (*actor.PID, error) {
	pid, err := sys.Root.SpawnNamed(props(func() actor.Actor { return &gateway{manager: manager} }), name)
	if err != nil {
		return nil, fmt.Errorf("%w: name %q for the runtime's PID: %w", ErrInvalidArgument, name, err)
	}
	return pid, nil
}
