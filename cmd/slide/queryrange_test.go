package main

import (
	"strings"
	"testing"
)

func TestQueryRangeTableAndChart(t *testing.T) {
	addr := queryServer(t)
	out, _, err := runQuery(t, "range", "--addr", addr, "--metric", "latency_ms", "--key", "tenant-1", "--plot", "max")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	// Title, sparkline, header, then one row for each of the 30 slots of the retention.
	if len(lines) != 33 {
		t.Fatalf("%d lines, want 33:\n%s", len(lines), out)
	}
	if !strings.HasPrefix(lines[0], "latency_ms tenant-1: windows of 10s every 10s, [2025-11-30T07:59:10Z, 08:04:10Z)") {
		t.Errorf("title %q", lines[0])
	}
	// tenant-1's slot maxima are 30 + j%10 over the slots from 08:00:00 to 08:04:00 (the
	// current one); the 5 slots of the retention before 08:00:00 are empty, drawn as spaces.
	spark := []rune(lines[1])
	if string(spark[:5]) != "     " || spark[5] != '▆' || spark[14] != '█' || spark[29] != '▇' {
		t.Errorf("sparkline %q", lines[1])
	}
	row := strings.Fields(lines[len(lines)-1]) // 08:04:10 ends the slot of the event at 08:04:00
	if row[0] != "08:04:10" || row[1] != "1" || row[len(row)-2] != "34" {
		t.Errorf("row %q", lines[len(lines)-1])
	}
	if _, _, err := runQuery(t, "range", "--addr", addr, "--metric", "latency_ms"); err == nil {
		t.Error("range without --key succeeded")
	}
	// --span reaches back less than the retention: the points of its last minute.
	out, _, err = runQuery(t, "range", "--addr", addr, "--metric", "latency_ms", "--key", "tenant-1", "--span", "1m", "--json")
	if err != nil || strings.Count(out, `"count":`) != 6 {
		t.Errorf("--span 1m: %v, %d points, want the 6 of a minute:\n%s", err, strings.Count(out, `"count":`), out)
	}
	out, _, err = runQuery(t, "range", "--addr", addr, "--metric", "latency_ms", "--key", "tenant-*", "--window", "1m", "--step", "1m", "--json")
	if err != nil || !strings.Contains(out, `"series":3`) || !strings.Contains(out, `"step":"1m"`) {
		t.Errorf("json: %v %s", err, out)
	}
}

// TestDatesAcrossDays: a window or history of more than a day names the days. The title of
// slide query window --window 2d read "[2026-12-01T06:57:00Z, 06:57:00Z)", a span that looks
// empty, and the rows of range --step 1d each "00:00:00", the same line seven times.
func TestDatesAcrossDays(t *testing.T) {
	day0 := int64(1796083200000) // 2026-12-01T00:00:00Z
	const h, d = int64(3_600_000), int64(86_400_000)
	for _, c := range []struct {
		from, to int64
		want     string
	}{
		{day0 + 9*h, day0 + 10*h, "[2026-12-01T09:00:00Z, 10:00:00Z)"},
		{day0 + 6*h, day0 + 2*d + 6*h, "[2026-12-01T06:00:00Z, 2026-12-03T06:00:00Z)"},
	} {
		if got := span(c.from, c.to); got != c.want {
			t.Errorf("span: %s, want %s", got, c.want)
		}
	}
	var points []rangePoint
	for i := range int64(3) {
		points = append(points, rangePoint{From: day0 + i*d, To: day0 + (i+1)*d})
	}
	var b strings.Builder
	if err := printPoints(&b, points, "count"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2026-12-02 00:00:00", "2026-12-03 00:00:00", "2026-12-04 00:00:00"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("rows of days lack %s:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := printPoints(&b, points[:1:1], "count"); err != nil || strings.Contains(b.String(), "2026-12-02 ") {
		t.Errorf("one day's point: the time alone, as before:\n%s", b.String())
	}
}
