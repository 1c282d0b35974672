package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"

	"github.com/slide-metrics/slide/limiter/limithttp"
)

// quota prints GET /v1/quota: the key's plan, limit, used, remaining and reset, and a row
// per level for a policy with levels.
func (c *queryClient) quota(ctx context.Context, v url.Values, w io.Writer) error {
	var a limithttp.QuotaJSON
	if done, err := c.answer(ctx, "/v1/quota", v, w, &a); done {
		return err
	}
	plan := a.Plan
	if plan == "" {
		plan = "(none)"
	}
	fmt.Fprintf(w, "%s of %s, plan %s\n", shown(a.Policy), shown(a.Key), shown(plan))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "level\tlimit\tused\tremaining\treset\n")
	fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", "(all)", a.Limit, a.Used, a.Remaining, a.Reset)
	for _, l := range a.Levels {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", shown(l.Level), l.Limit, l.Used, l.Remaining, l.Reset)
	}
	return tw.Flush()
}
