package redislimit_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

// An ACL user that may not run what the scripts need is found by the check, which names
// what to grant: without EVAL a user decides until Redis restarts (the NOSCRIPT fallback
// is EVAL), without a command the scripts call every decision fails with Redis's
// "can't run this command or subcommand script: <sha>", naming no command.
func TestCheckAccess(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		acl  []string
		want string // "" = no error
	}{
		{"all", []string{"~*", "+@all"}, ""},
		// docs/operating.md's ACL
		{"documented", strings.Fields("~rl:* +eval +evalsha +time +get +set +incrby +decrby +del +pexpire +hmget +hset +zadd +zcard +zrange +zremrangebyscore"), ""},
		{"no_eval", []string{"~*", "+@all", "-eval"}, "'eval' command"},
		{"no_evalsha", []string{"~*", "+@all", "-evalsha"}, "'evalsha' command"},
		{"no_zadd", []string{"~*", "+@all", "-zadd"}, "may not run ZADD"},
		{"other_keys", []string{"~other:*", "+@all"}, "may not run GET on rl:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"ACL", "SETUSER", "u-" + tc.name, "on", ">pw"}, tc.acl...)
			if _, err := s.Do(args...); err != nil {
				t.Fatal(err)
			}
			c := connClient(t, redislimit.Conn{Addr: s.Addr, Username: "u-" + tc.name, Password: "pw"})
			err := redislimit.CheckAccess(ctx, c, "")
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckAccess = %v, want nil", err)
			case tc.want != "" && err == nil:
				t.Errorf("CheckAccess = nil, want an error with %q", tc.want)
			case tc.want != "" && (!strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "needs +eval +evalsha")):
				t.Errorf("CheckAccess = %v, want %q and what to grant", err, tc.want)
			}
		})
	}
}

// CheckAccess asks about every command the scripts call.
func TestAccessCoversScripts(t *testing.T) {
	checked := map[string]bool{}
	for _, c := range redislimit.ScriptCommands {
		name, _, _ := strings.Cut(c, ",")
		checked[strings.Trim(name, "'")] = true
	}
	srcs := []string{redislimit.LevelsScript().Src, redislimit.BatchScript().Src}
	for a := limiter.FixedWindow; a <= limiter.LeakyBucket; a++ {
		srcs = append(srcs, redislimit.ScriptFor(a).Src)
	}
	call := regexp.MustCompile(`redis\.p?call\('([A-Z]+)'`)
	for _, src := range srcs {
		for _, m := range call.FindAllStringSubmatch(src, -1) {
			if !checked[m[1]] {
				t.Errorf("the scripts call %s, which CheckAccess does not ask about", m[1])
			}
		}
	}
}
