package redislimit

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/slide-metrics/slide/limiter"
)

// The Lua scripts: embedded, each joined to scripts/prelude.lua, loaded with SCRIPT LOAD
// and run with EVALSHA (EVAL after NOSCRIPT).

//go:embed scripts/*.lua
var scriptFS embed.FS

// Script is one embedded Lua script and its SHA1, as EVALSHA wants it.
type Script struct {
	Name string // file name without .lua, e.g. "sliding_log"
	Src  string
	SHA  string
}

// loadScript returns the embedded script scripts/name.lua behind
// scripts/prelude.lua, the shebang and clock every script opens with.
func loadScript(name string) *Script {
	prelude, err := scriptFS.ReadFile("scripts/prelude.lua")
	if err != nil {
		panic("limiter/redis: embedded script missing: prelude") // build-time invariant
	}
	body, err := scriptFS.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic("limiter/redis: embedded script missing: " + name) // build-time invariant
	}
	return newScript(name, string(append(prelude, body...)))
}

// newScript returns the Script of src, with its SHA1.
func newScript(name, src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{Name: name, Src: src, SHA: hex.EncodeToString(sum[:])}
}

var scripts = func() [6]*Script {
	var s [6]*Script
	for a := limiter.FixedWindow; a <= limiter.LeakyBucket; a++ {
		s[a] = loadScript(a.String())
	}
	return s
}()

// ScriptFor returns the script that implements algorithm a, or nil.
func ScriptFor(a limiter.Algorithm) *Script {
	if a < limiter.FixedWindow || a > limiter.LeakyBucket {
		return nil
	}
	return scripts[a]
}

// Load sends every script with SCRIPT LOAD, so the first decisions do not
// pay the NOSCRIPT round trip. Optional.
func (b *Backend) Load(ctx context.Context) error {
	for _, s := range append(scripts[limiter.FixedWindow:], batchScript, levelsScript) {
		if err := b.c.ScriptLoad(ctx, s.Src).Err(); err != nil {
			return fmt.Errorf("loading script %s: %w", s.Name, err)
		}
	}
	return nil
}

func isNoScript(err error) bool { return goredis.HasErrorPrefix(err, "NOSCRIPT") }

func (b *Backend) called(cmd string) {
	if b.onCall != nil {
		b.onCall(cmd)
	}
}

// run calls s with EVALSHA, and with EVAL after NOSCRIPT (which cannot have
// run the script); in a Cluster, once more at the node a MOVED or ASK reply
// names (which cannot have run it either: redirect.go).
func (b *Backend) run(ctx context.Context, s *Script, keys []string, args []any) *goredis.Cmd {
	cmd := b.c.EvalSha(ctx, s.SHA, keys, args...)
	b.called("evalsha")
	if isNoScript(cmd.Err()) {
		cmd = b.c.Eval(ctx, s.Src, keys, args...)
		b.called("eval")
	}
	return b.follow(ctx, cmd, s, keys, args)
}
