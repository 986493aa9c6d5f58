package actors

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Owner tokens prove the ownership of locks acquired by message: the sender
// PID of a message proves nothing (over protoactor remote it is whatever the
// peer claims), so the AcquireResponse hands out 128 random bits that every
// release, renew and cancel must present.

// ownerTokenBytes is the size of an owner token; it travels as twice as
// many hex digits.
const ownerTokenBytes = 16

// ownerToken is a parsed owner token.
type ownerToken [ownerTokenBytes]byte

// newOwnerToken draws a token from crypto/rand.
func newOwnerToken() ownerToken {
	var t ownerToken
	_, _ = rand.Read(t[:]) // never fails (crypto/rand)
	return t
}

// parseOwnerToken reads a token as a message carries it. The error never
// quotes the input: it may be someone's real token with a typo.
func parseOwnerToken(s string) (ownerToken, error) {
	var t ownerToken
	if len(s) != 2*ownerTokenBytes {
		return t, fmt.Errorf("%w: owner_token must be %d hex digits (%d bits), got %d characters",
			ErrInvalidArgument, 2*ownerTokenBytes, 8*ownerTokenBytes, len(s))
	}
	if _, err := hex.Decode(t[:], []byte(s)); err != nil {
		return t, fmt.Errorf("%w: owner_token must be %d hex digits (%d bits)", ErrInvalidArgument, 2*ownerTokenBytes, 8*ownerTokenBytes)
	}
	return t, nil
}

// validateOwnerToken reports why s (non-empty) cannot be an owner token.
func validateOwnerToken(s string) error {
	_, err := parseOwnerToken(s)
	return err
}

// NewOwnerToken draws an owner token, as messages carry it.
func NewOwnerToken() string { return newOwnerToken().String() }

func (t ownerToken) String() string { return hex.EncodeToString(t[:]) }

// tokenOwner is the Redis owner id of the locks that the owner of token
// acquires by message from runtime runtimeID: "<runtime id>:<32 hex digits>",
// the hex being a hash of the token. The scripts compare owner ids, so only
// the token's holder reaches its holds; hashing keeps the token itself out
// of Redis (where MONITOR, a replica, a backup or a Redisson client listing
// the hash would show it) and out of everything that names owners
// (LockLost, logs, errors).
func tokenOwner(runtimeID string, token ownerToken) string {
	h := sha256.New()
	h.Write([]byte("actorlock owner token\x00"))
	h.Write(token[:])
	return runtimeID + ":" + hex.EncodeToString(h.Sum(nil)[:ownerTokenBytes])
}

// OwnerOfToken is actorkit.TokenOwner for a token as messages carry it.
func OwnerOfToken(runtimeID, token string) (string, error) {
	t, err := parseOwnerToken(token)
	if err != nil {
		return "", err
	}
	return tokenOwner(runtimeID, t), nil
}
