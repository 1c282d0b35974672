package query

import (
	"slices"
	"strings"

	"github.com/slide-metrics/slide/window"
)

// Labels of exported series (issue #27). A labelled series is exported with key="<its key>"
// and one Prometheus label per label of its series string, and with no other: a family's
// metrics may carry different label names (the exposition formats and client_golang's
// plain registry allow it). Giving every series the union of the scrape's label names, as
// before, made a scrape of n series and m distinct names n·m labels (a thousand series of
// one distinct name each took the scrape past a minute and the process past gigabytes), and
// made a series' exported names depend on which other series existed. A label whose name is
// one an export sets itself (exportReserved) is exported as exported_<name>, prefixed again
// while the series has that name: Prometheus' own rule for a scraped label that collides
// with a target label, applied to each series alone so that its labels never change.

// exportReserved are the label names the exports set themselves: the families' metric, key
// and window, the summary's quantile, and le, which the text format writes for a histogram's
// +Inf bucket. key is no series label (window.ValidLabelName).
var exportReserved = []string{"le", "metric", "quantile", "window"}

// exportKey is the key label an exported series shows and whether its labels are
// exported besides: a string no door could have written as a labelled series (an old
// snapshot's key holding a 0xFF byte) is exported whole as its key, as before labels.
func exportKey(series string) (key string, labelled bool) {
	if window.HasLabels(series) && window.CheckSeries(series, len(series)) == nil {
		return window.SeriesKeyOf(series), true
	}
	return series, false
}

// seriesLabels appends to dst the labels of series as exported, name and value, sorted by
// exported name: nothing for an unlabelled series.
func seriesLabels(dst [][2]string, series string) [][2]string {
	if _, labelled := exportKey(series); !labelled {
		return dst
	}
	at := len(dst)
	window.EachLabel(series, func(name, value string) bool {
		dst = append(dst, [2]string{name, value})
		return true
	})
	own := dst[at:]
	has := func(n string) bool { return slices.ContainsFunc(own, func(l [2]string) bool { return l[0] == n }) }
	for i := range own {
		n := own[i][0]
		if !slices.Contains(exportReserved, n) {
			continue
		}
		for n = "exported_" + n; has(n) || slices.Contains(exportReserved, n); n = "exported_" + n {
		}
		own[i][0] = n
	}
	slices.SortFunc(own, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return dst
}

// labelNames joins the names of labels into a map key of one set of label names.
func labelNames(labels [][2]string) string {
	var b strings.Builder
	for _, l := range labels {
		b.WriteString(l[0])
		b.WriteByte(0)
	}
	return b.String()
}

// descCache builds each set of label names' descriptors once a scrape.
type descCache[D any] struct {
	m    map[string]D
	make func(names []string) D
}

func (c *descCache[D]) get(labels [][2]string) D {
	k := labelNames(labels)
	if d, ok := c.m[k]; ok {
		return d
	}
	names := make([]string, len(labels))
	for i, l := range labels {
		names[i] = l[0]
	}
	if c.m == nil {
		c.m = map[string]D{}
	}
	d := c.make(names)
	c.m[k] = d
	return d
}
