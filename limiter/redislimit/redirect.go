package redislimit

import (
	"context"
	"errors"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// Redis Cluster redirects. The Cluster client is built without go-redis's redirect loop,
// which also retries timeouts and dropped connections (a retried script could count a
// request twice). A MOVED or ASK reply is different: the node that gives it ran nothing,
// so sending the call once to the node it names still counts it at most once. Without
// that, every decision of a slot being migrated (ASK, for as long as the migration
// lasts) and the first of each moved slot after a failover (MOVED) failed and followed
// on_backend_error.

// redirectOf reports whether err is a MOVED or ASK reply, and the node it names.
func redirectOf(err error) (ask bool, addr string, ok bool) {
	if err == nil {
		return false, "", false
	}
	var re goredis.Error
	if !errors.As(err, &re) {
		return false, "", false
	}
	f := strings.Fields(re.Error())
	if len(f) != 3 || (f[0] != "MOVED" && f[0] != "ASK") {
		return false, "", false
	}
	return f[0] == "ASK", f[2], true
}

// follow sends a script call that a Cluster node answered with MOVED or ASK (cmd) once
// to the node the reply names (after ASKING for ASK; EVAL after NOSCRIPT there), and
// returns that node's reply. Any other reply, a client that is not a Cluster's, or a node
// the slot map does not know, returns cmd as it is.
func (b *Backend) follow(ctx context.Context, cmd *goredis.Cmd, s *Script, keys []string, args []any) *goredis.Cmd {
	ask, addr, ok := redirectOf(cmd.Err())
	if !ok || b.cluster == nil {
		return cmd
	}
	node := b.node(ctx, addr)
	if node == nil {
		return cmd
	}
	if b.onRedir != nil {
		if ask {
			b.onRedir("ask")
		} else {
			b.onRedir("moved")
		}
	}
	send := func(eval bool) *goredis.Cmd {
		pipe := node.Pipeline()
		if ask {
			pipe.Do(ctx, "asking")
		}
		var c *goredis.Cmd
		if eval {
			c = pipe.Eval(ctx, s.Src, keys, args...)
			b.called("eval")
		} else {
			c = pipe.EvalSha(ctx, s.SHA, keys, args...)
			b.called("evalsha")
		}
		_, _ = pipe.Exec(ctx) // the script's error is its command's
		return c
	}
	c := send(false)
	if isNoScript(c.Err()) {
		c = send(true)
	}
	if errors.Is(c.Err(), goredis.ErrClosed) {
		b.nodes.Delete(addr) // go-redis closed a node that left the cluster
	}
	return c
}

// node returns the client go-redis keeps for the Cluster node at addr, a master or a
// replica in its slot map (a replica just promoted may still be listed as one), or nil.
func (b *Backend) node(ctx context.Context, addr string) *goredis.Client {
	if v, ok := b.nodes.Load(addr); ok {
		return v.(*goredis.Client)
	}
	var found *goredis.Client
	done := make(chan *goredis.Client, 1)
	_ = b.cluster.ForEachShard(ctx, func(_ context.Context, n *goredis.Client) error {
		if n.Options().Addr == addr {
			select {
			case done <- n:
			default:
			}
		}
		return nil
	})
	select {
	case found = <-done:
		b.nodes.Store(addr, found)
	default:
	}
	return found
}
