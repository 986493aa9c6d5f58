// Package messages is actorlock's protobuf protocol: what any actor, local or
// remote, sends to a runtime's PID (see lock.proto for the rules).
package messages

//go:generate protoc --go_out=. --go_opt=paths=source_relative lock.proto queue.proto
