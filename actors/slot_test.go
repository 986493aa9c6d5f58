package actors

import "testing"

// Slots published in the Redis Cluster specification and CLUSTER KEYSLOT.
func TestHashSlot(t *testing.T) {
	for key, want := range map[string]uint16{
		"foo":                                12182,
		"bar":                                5061,
		"hello":                              866,
		"123456789":                          12739, // CRC16/XMODEM check value 0x31C3
		"{user1000}.following":               3443,
		"{user1000}.followers":               3443,
		"foo{}{bar}":                         8363, // empty first tag: the whole key is hashed
		"foo{{bar}}zap":                      4015, // the tag is "{bar"
		"redisson_lock__channel:{orders:42}": hashSlot("orders:42"),
	} {
		if got := hashSlot(key); got != want {
			t.Errorf("hashSlot(%q) = %d, want %d", key, got, want)
		}
	}
}
