package actorlock

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/internal/ext"
)

// DefaultRemoteName is the name a runtime started with remoting.WithRemote
// registers its PID under, unless remoting.Config.Name says otherwise.
const DefaultRemoteName = "actorlock"

func init() {
	ext.Option = func(s ext.Server) any {
		return Option(func(c *config) {
			if s.Err != nil {
				if c.err == nil {
					c.err = s.Err
				}
				return
			}
			c.server = &s
		})
	}
}

// startServer starts the server of remoting.WithRemote on the runtime's
// system and keeps what stops it.
func (rt *Runtime) startServer(s *ext.Server) error {
	stop, err := s.Start(rt.sys)
	if err != nil {
		return err
	}
	rt.stopServer = stop
	return nil
}

// RemoteAddress is the address actors of other processes reach the runtime
// at (host:port), or "" when it was not started with remoting.WithRemote.
func (rt *Runtime) RemoteAddress() string {
	if rt.stopServer == nil {
		return ""
	}
	return rt.sys.Address()
}

// NamedPID is the runtime's PID under its well-known name (remoting.Config's
// Name, or WithName), as actors of other processes address it:
// actor.NewPID(<node address>, name). Nil when it has no name.
func (rt *Runtime) NamedPID() *actor.PID {
	if rt.gateway == nil {
		return nil
	}
	return rt.gateway
}

// TokenOwner is the owner id (the lock hash's field in Redis) of the locks
// that the owner of token acquires by message from this runtime; the same
// as AcquireResponse.owner and LockLost.owner.
func (rt *Runtime) TokenOwner(token string) (string, error) {
	return actors.OwnerOfToken(rt.id, token)
}

// NewOwnerToken draws an owner token (128 bits from crypto/rand, as 32 hex
// digits) for an AcquireRequest that names its own: see
// AcquireRequest.owner_token.
func NewOwnerToken() string { return actors.NewOwnerToken() }
