package query

import (
	"slices"

	"github.com/slide-metrics/slide/window"
)

// Labels of exported series (issue #27). A labelled series is exported with key="<its key>"
// and one Prometheus label per label of its series string. client_golang and Prometheus
// want the metrics of one family to carry the same label names, so each scrape exports
// every series of an export with the union of the label names of the series it exports,
// a label a series has not as "" (which Prometheus reads as no label, as slide does). A
// label whose name is one an export sets itself (exportReserved) is exported as
// exported_<name>, prefixed again while the name is taken: Prometheus' own rule for a
// scraped label that collides with a target label.

// exportReserved are the label names the exports set themselves: the families' metric, key
// and window, the summary's quantile, and le, which the text format writes for a histogram's
// +Inf bucket. key is no series label (window.ValidLabelName).
var exportReserved = []string{"le", "metric", "quantile", "window"}

// exportLabels is the union of the label names of one scrape's series of an export.
type exportLabels struct {
	names    []string // the series' label names, sorted
	exported []string // names[i] as exported: exported_ prefixed where it collides
}

// exportKey is the key label an exported series shows and whether its labels are
// exported besides: a string no door could have written as a labelled series (an old
// snapshot's key holding a 0xFF byte) is exported whole as its key, as before labels.
func exportKey(series string) (key string, labelled bool) {
	if window.HasLabels(series) && window.CheckSeries(series, len(series)) == nil {
		return window.SeriesKeyOf(series), true
	}
	return series, false
}

// newExportLabels gathers the label names of the series of keys (the series of each spec
// of an export). Every listed series counts, also those past the export cap: a series
// evicted between the listing and its read lets one more in, whose labels must be in the
// union too; a name only the capped series have costs an empty label.
func newExportLabels(keys [][]string) *exportLabels {
	l := &exportLabels{}
	for _, ks := range keys {
		for _, series := range ks {
			if _, labelled := exportKey(series); !labelled {
				continue
			}
			window.EachLabel(series, func(name, _ string) bool {
				if i, found := slices.BinarySearch(l.names, name); !found {
					l.names = slices.Insert(l.names, i, name)
				}
				return true
			})
		}
	}
	if len(l.names) == 0 {
		return l
	}
	taken := map[string]bool{}
	for _, n := range exportReserved {
		taken[n] = true
	}
	for _, n := range l.names {
		taken[n] = true
	}
	l.exported = make([]string, len(l.names))
	for i, n := range l.names {
		if slices.Contains(exportReserved, n) {
			for taken[n] {
				n = "exported_" + n
			}
			taken[n] = true
		}
		l.exported[i] = n
	}
	return l
}

// values appends to dst the values of the union's labels for series, in the order of
// names ("" for a label series has not).
func (l *exportLabels) values(dst []string, series string) []string {
	at := len(dst)
	for range l.names {
		dst = append(dst, "")
	}
	window.EachLabel(series, func(name, value string) bool {
		if i, found := slices.BinarySearch(l.names, name); found {
			dst[at+i] = value
		}
		return true
	})
	return dst
}

// pairs appends to dst every label of an exported series as name and value, sorted by name
// as client_golang writes them: key, metric and window, then the union's labels.
func (l *exportLabels) pairs(dst [][2]string, metric, key, win, series string) [][2]string {
	dst = append(dst, [2]string{labelKey, key}, [2]string{labelMetric, metric}, [2]string{labelWindow, win})
	if len(l.names) == 0 {
		return dst
	}
	at := len(dst)
	for i := range l.names {
		dst = append(dst, [2]string{l.exported[i], ""})
	}
	window.EachLabel(series, func(name, value string) bool {
		if i, found := slices.BinarySearch(l.names, name); found {
			dst[at+i][1] = value
		}
		return true
	})
	slices.SortFunc(dst[at-3:], func(a, b [2]string) int {
		switch {
		case a[0] < b[0]:
			return -1
		case a[0] > b[0]:
			return 1
		}
		return 0
	})
	return dst
}
