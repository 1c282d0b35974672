package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

type rangeJSON struct {
	Metric string   `json:"metric"`
	Key    string   `json:"key"`
	Window string   `json:"window"`
	Step   string   `json:"step"`
	Match  string   `json:"match"`
	By     []string `json:"by"`
	rangeSpan
	Groups []struct {
		Labels map[string]string `json:"labels"`
		rangeSpan
	} `json:"groups"`
	Warnings []string `json:"warnings"`
}

// rangeSpan is the points of a range answer, or of one of its groups.
type rangeSpan struct {
	From   int64        `json:"from"`
	To     int64        `json:"to"`
	Series int          `json:"series"`
	Points []rangePoint `json:"points"`
}

type rangePoint struct {
	From      int64               `json:"from"`
	To        int64               `json:"to"`
	Count     uint64              `json:"count"`
	Sum       float64             `json:"sum"`
	Avg       *float64            `json:"avg"`
	Max       *float64            `json:"max"`
	RatePerS  float64             `json:"rate_per_s"`
	Quantiles map[string]*float64 `json:"quantiles"`
}

// rangeRead prints /v1/range as a table, one row a point, with a bar chart of the plot
// column beside it and a sparkline of it above; a grouped answer (--by) as one such block a
// group, titled with the group's labels.
func (c *queryClient) rangeRead(ctx context.Context, v url.Values, plot string, w io.Writer) error {
	var a rangeJSON
	if done, err := c.answer(ctx, "/v1/range", v, w, &a); done {
		return err
	}
	plot = strings.ToLower(plot)
	if f, err := strconv.ParseFloat(plot, 64); err == nil && f <= 1 {
		plot = pname(plot)
	}
	if a.By == nil {
		fmt.Fprintf(w, "%s: windows of %s every %s, %s\n", selected(a.Metric, a.Key, a.Match), a.Window, a.Step, span(a.From, a.To))
		return printPoints(w, a.Points, plot)
	}
	fmt.Fprintf(w, "%s by %s: windows of %s every %s, %d groups\n", selected(a.Metric, a.Key, a.Match), shown(strings.Join(a.By, ",")), a.Window, a.Step, len(a.Groups))
	printWarnings(w, a.Warnings)
	for _, g := range a.Groups {
		fmt.Fprintf(w, "\n%s: %d series, %s\n", labelSet(g.Labels, a.By), g.Series, span(g.From, g.To))
		if err := printPoints(w, g.Points, plot); err != nil {
			return err
		}
	}
	return nil
}

// printPoints writes the sparkline of plot and the table of points.
func printPoints(w io.Writer, points []rangePoint, plot string) error {
	var qs []string
	if len(points) > 0 {
		qs = sortedQuantiles(points[0].Quantiles)
	}
	pick := func(i int) *float64 {
		p := points[i]
		switch plot {
		case "count":
			x := float64(p.Count)
			return &x
		case "sum":
			return &p.Sum
		case "avg":
			return p.Avg
		case "max":
			return p.Max
		case "rate":
			return &p.RatePerS
		}
		for _, q := range qs {
			if pname(q) == plot {
				return p.Quantiles[q]
			}
		}
		return nil
	}
	vals := make([]*float64, len(points))
	top := 0.0
	for i := range points {
		vals[i] = pick(i)
		if vals[i] != nil && *vals[i] > top {
			top = *vals[i]
		}
	}
	fmt.Fprintf(w, "%s  %s (max %s)\n", sparkline(vals, top), plot, num(&top))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "to\tcount\trate/s")
	for _, q := range qs {
		fmt.Fprintf(tw, "\t%s", pname(q))
	}
	fmt.Fprintf(tw, "\tmax\t%s\t\n", plot)
	// A row is named by its end's time of day, and by its date too when the rows end on
	// different days (a history of days: each row's time alone would be the same).
	layout := "15:04:05"
	if len(points) > 0 && !sameDay(time.UnixMilli(points[0].To).UTC(), time.UnixMilli(points[len(points)-1].To).UTC()) {
		layout = "2006-01-02 15:04:05"
	}
	for i, p := range points {
		fmt.Fprintf(tw, "%s\t%d\t%s", time.UnixMilli(p.To).UTC().Format(layout), p.Count, num(&p.RatePerS))
		for _, q := range qs {
			fmt.Fprintf(tw, "\t%s", num(p.Quantiles[q]))
		}
		fmt.Fprintf(tw, "\t%s\t%s\t\n", num(p.Max), bar(vals[i], top, 24))
	}
	return tw.Flush()
}

var sparks = []rune("▁▂▃▄▅▆▇█")

// sparkline draws one rune per value, scaled to top; a missing value is a space.
func sparkline(vals []*float64, top float64) string {
	var b strings.Builder
	for _, v := range vals {
		if v == nil || !(top > 0) {
			b.WriteByte(' ')
			continue
		}
		i := int(math.Round(*v / top * float64(len(sparks)-1)))
		b.WriteRune(sparks[min(max(i, 0), len(sparks)-1)])
	}
	return b.String()
}

// bar is a left-aligned bar of at most width cells for v out of top (tabwriter aligns right,
// so the bar is padded to its full width with spaces).
func bar(v *float64, top float64, width int) string {
	n := 0
	if v != nil && top > 0 {
		n = int(math.Round(*v / top * float64(width)))
	}
	n = min(max(n, 0), width)
	return strings.Repeat("█", n) + strings.Repeat(" ", width-n)
}
