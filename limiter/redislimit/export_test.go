package redislimit

import (
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// SetClockSkew sets the Backend's estimate of Redis's clock to the local one
// plus d, as a reply showing that difference would.
func SetClockSkew(b *Backend, d time.Duration) { b.skew.Store(d.Microseconds()) }

// LevelKeys returns the KEYS of the fixed_window_levels call deciding key under p
// (a policy with levels) in the window of now.
func LevelKeys(b *Backend, p *limiter.Policy, key string, now time.Time) []string {
	return b.levelKeys(p, p.Levels.LevelKeys(key), windowAt(p, now.UnixMicro()))
}

// ScriptCommands are the commands CheckAccess asks about, with their arguments.
var ScriptCommands = scriptCommands
