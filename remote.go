package actorlock

import "github.com/actorlock/actorlock/internal/ext"

// The hooks through which packages remoting and actorkit, which the root
// must not import, configure a runtime and reach its actors.
func init() {
	ext.Option = func(s ext.Server) any {
		return Option(func(c *config) {
			if s.Err != nil {
				c.fail(s.Err)
				return
			}
			c.server = &s
		})
	}
	ext.ActorsOption = func(a ext.Actors) any {
		return Option(func(c *config) {
			if a.Err != nil {
				c.fail(a.Err)
				return
			}
			if a.System != nil {
				c.system = a.System
			}
			if a.Name != "" {
				c.name = a.Name
			}
		})
	}
	ext.RuntimeOf = func(v any) (ext.Runtime, bool) {
		rt, _ := v.(*Runtime)
		if !rt.valid() {
			return ext.Runtime{}, false
		}
		return ext.Runtime{System: rt.sys, Manager: rt.actors.Manager(), Named: rt.gateway, ID: rt.id, Remote: rt.stopServer != nil}, true
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
