package backtest

import (
	"bufio"
	"bytes"
	"io"
	"math"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/window"
)

// noTS stands for "no time" as the default time of a line read by ReadFormatLog: a log has
// no record time to give an event without one.
const noTS = math.MinInt64

// ReadFormatLog reads a log of another shape through f, one of event's Formats (an access
// log through an event.MapDecoder: slide backtest --event-map), and calls fn for each request
// and metric event, in file order. Each line that is not blank is one request, of cost 1, by
// the key and at the time of its first event (the key label alone: the series' other labels
// are no part of a limiter's key), followed by its events as metric events (Request.Metric
// set), which usage rules read. A line refused by f, or whose events have no time (the map
// names no ts, or the line lacks it), is an error wrapping ErrLog that names the line and
// says why (f.Explain). The log must be sorted by that time, as ReadLog's.
func ReadFormatLog(r io.Reader, f event.Format, fn func(Request) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLogLine)
	var (
		line int64
		evs  []window.Event
		bad  event.Reason
	)
	collect := func(_ []byte, ev window.Event, r event.Reason) {
		if r != event.ReasonNone && bad == event.ReasonNone {
			bad = r
		}
		evs = append(evs, ev)
	}
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		evs, bad = evs[:0], event.ReasonNone
		f.DecodeLines(text, noTS, collect)
		switch {
		case bad != event.ReasonNone:
			return lineErr(line, "refused as %s: %s", bad, f.Explain(text))
		case len(evs) == 0:
			return lineErr(line, "no event in it")
		}
		for _, ev := range evs {
			if ev.TS == noTS {
				return lineErr(line, "no time: the map names no ts, or the line lacks its field")
			}
		}
		req, err := request(line, evs[0].TS, nil, window.SeriesKeyOf(evs[0].Key), 1, "")
		if err != nil {
			return err
		}
		if err := fn(req); err != nil {
			return err
		}
		for _, ev := range evs {
			m, err := request(line, ev.TS, nil, ev.Key, 1, "")
			if err != nil {
				return err
			}
			m.Metric, m.Value, m.Count = ev.Metric, ev.Value, ev.Count
			if err := fn(m); err != nil {
				return err
			}
		}
	}
	return scanErr(sc, line)
}
