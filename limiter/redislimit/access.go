package redislimit

import (
	"context"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// accessScript asks Redis whether the connection's ACL user may run each command the
// limiter's scripts call, on a key under the prefix (ARGV[1]; no key is declared, so the
// check runs on any Cluster node), and answers the first it may not, or ”. It writes
// nothing (no-writes: it runs over maxmemory too).
var accessScript = func() *Script {
	var b strings.Builder
	b.WriteString("#!lua flags=no-writes\nlocal k = ARGV[1]\nfor _, c in ipairs({")
	for _, c := range scriptCommands {
		fmt.Fprintf(&b, "{%s},", c)
	}
	b.WriteString("}) do\n  if not redis.acl_check_cmd(unpack(c)) then return c[1] end\nend\nreturn ''\n")
	return newScript("access_check", b.String())
}()

// scriptCommands are the commands scripts/*.lua call, each with arguments of its shape
// (k the key); TestAccessCoversScripts keeps the list whole.
var scriptCommands = []string{
	"'TIME'", "'GET', k", "'SET', k, '1', 'PX', '1'", "'INCRBY', k, '1'", "'DECRBY', k, '1'",
	"'DEL', k", "'PEXPIRE', k, '1'", "'HMGET', k, 'w'", "'HSET', k, 'w', '1'",
	"'ZADD', k, '1', 'm'", "'ZCARD', k", "'ZRANGE', k, '0', '0'", "'ZREMRANGEBYSCORE', k, '-inf', '0'",
}

// CheckAccess runs, as a decision does, a script with EVAL and then with EVALSHA, which
// asks Redis whether the ACL user may call every command the limiter's scripts call on
// keys under keyPrefix ("" = "rl:"). It fails, naming what to grant, when the user lacks
// any of them: a user allowed EVALSHA but not EVAL decides until Redis restarts (the
// NOSCRIPT fallback is EVAL), one denied a command inside the scripts fails every
// decision with an error that does not name it. For Cluster, run it on each master.
func CheckAccess(ctx context.Context, c Client, keyPrefix string) error {
	if keyPrefix == "" {
		keyPrefix = "rl:"
	}
	key := keyPrefix + "{access-check}"
	need := func() string {
		var b strings.Builder
		b.WriteString("+eval +evalsha")
		for _, c := range scriptCommands {
			name, _, _ := strings.Cut(c, ",")
			b.WriteString(" +" + strings.ToLower(strings.Trim(name, "'")))
		}
		return b.String() + " ~" + keyPrefix + "*"
	}
	for _, cmd := range []*goredis.Cmd{
		c.Eval(ctx, accessScript.Src, nil, key),
		c.EvalSha(ctx, accessScript.SHA, nil, key),
	} {
		denied, err := cmd.Text()
		switch {
		case goredis.HasErrorPrefix(err, "NOPERM"):
			return fmt.Errorf("checking the limiter's Redis access: %w (the Redis user needs %s)", err, need())
		case err != nil:
			return fmt.Errorf("checking the limiter's Redis access: %w", err)
		case denied != "":
			return fmt.Errorf("checking the limiter's Redis access: the Redis user may not run %s on %s… inside the limiter's scripts (it needs %s)", denied, keyPrefix, need())
		}
	}
	return nil
}

// EvictionWarning reads INFO memory from c (one server, or one Cluster master) and
// returns a warning when Redis evicts keys once it is full (maxmemory set and
// maxmemory-policy other than noeviction): every limiter key has a TTL, so the volatile-*
// policies evict them too, and an evicted key starts afresh, admitting a tenant its
// policy was denying. Nothing is logged by Redis or counted by slide when that happens.
// It returns "" when Redis does not evict, or when the user may not run INFO.
func EvictionWarning(ctx context.Context, c goredis.Cmdable) string {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return ""
	}
	var maxmem, policy string
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "maxmemory":
			maxmem = v
		case "maxmemory_policy":
			policy = v
		}
	}
	if maxmem == "" || maxmem == "0" || policy == "" || policy == "noeviction" {
		return ""
	}
	return "maxmemory-policy " + policy + " evicts keys once Redis holds maxmemory: an evicted limiter key starts afresh, admitting requests its policy was denying (Redis counts them in INFO stats evicted_keys); noeviction instead fails decisions over maxmemory by on_backend_error"
}
