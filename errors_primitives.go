package actorlock

// ErrPermitExpired: Release or UpdateLeaseTime of a permit-expirable
// semaphore's permit that is not held: its lease had run out (it went back
// to the pool and another holder may have it now, so whatever it guarded was
// not protected to the end), or it was released already, or never taken.
var ErrPermitExpired error = sentinelError("actorlock: permit expired")
