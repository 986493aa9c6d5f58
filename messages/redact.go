package messages

import (
	"log/slog"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// The messages that carry an owner token log without it: protoactor logs
// messages it cannot deliver (dead letters, failed remote sends) with slog,
// and an owner token in a log line would let whoever reads the logs act as
// the owner. slog resolves LogValue; fmt's %v still prints every field, so
// never format these messages with fmt where the output may be kept.

const redactedToken = "[redacted]"

// redacted is m as text, with its owner token replaced if set.
func redacted[T proto.Message](m T, token func(T) *string) slog.Value {
	if !m.ProtoReflect().IsValid() {
		return slog.StringValue("<nil>")
	}
	c := proto.Clone(m).(T)
	if t := token(c); *t != "" {
		*t = redactedToken
	}
	return slog.StringValue(string(c.ProtoReflect().Descriptor().Name()) + "{" + prototext.MarshalOptions{}.Format(c) + "}")
}

// LogValue logs m without its owner token.
func (m *AcquireRequest) LogValue() slog.Value {
	return redacted(m, func(c *AcquireRequest) *string { return &c.OwnerToken })
}

// LogValue logs m without its owner token.
func (m *AcquireResponse) LogValue() slog.Value {
	return redacted(m, func(c *AcquireResponse) *string { return &c.OwnerToken })
}

// LogValue logs m without its owner token.
func (m *ReleaseRequest) LogValue() slog.Value {
	return redacted(m, func(c *ReleaseRequest) *string { return &c.OwnerToken })
}

// LogValue logs m without its owner token.
func (m *CancelRequest) LogValue() slog.Value {
	return redacted(m, func(c *CancelRequest) *string { return &c.OwnerToken })
}

// LogValue logs m without its owner token.
func (m *RenewRequest) LogValue() slog.Value {
	return redacted(m, func(c *RenewRequest) *string { return &c.OwnerToken })
}
