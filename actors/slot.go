package actors

import "strings"

// hasHashTag reports whether key has a hash tag: a non-empty part between
// its first '{' and the first '}' after it, which alone decides its slot.
func hasHashTag(key string) bool {
	i := strings.IndexByte(key, '{')
	return i >= 0 && strings.IndexByte(key[i+1:], '}') > 0
}

// hashSlot is Redis Cluster's slot of key: CRC16 (XMODEM) of the key's hash
// tag, or of the whole key when it has none, modulo 16384.
func hashSlot(key string) uint16 {
	if hasHashTag(key) {
		i := strings.IndexByte(key, '{')
		key = key[i+1 : i+1+strings.IndexByte(key[i+1:], '}')]
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
