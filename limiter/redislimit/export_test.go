package redislimit

import "time"

// SetClockSkew sets the Backend's estimate of Redis's clock to the local one
// plus d, as a reply showing that difference would.
func SetClockSkew(b *Backend, d time.Duration) { b.skew.Store(d.Microseconds()) }
