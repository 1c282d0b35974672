package ingest

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/window"
)

// metrics are the consumer's Prometheus collectors, all named slide_ingest_*.
type metrics struct {
	events           *prometheus.CounterVec // {partition}
	bytes            *prometheus.CounterVec // {partition}
	lag              *prometheus.GaugeVec   // {partition}
	lagSeconds       *prometheus.GaugeVec   // {partition}
	rejected         *prometheus.CounterVec // {reason}
	restoreSkipped   *prometheus.CounterVec // {reason}
	expired          prometheus.Counter
	offsetResets     *prometheus.CounterVec // {partition,reason}
	tombstones       prometheus.Counter
	restoreDuration  prometheus.Histogram   //
	partitions       *prometheus.GaugeVec   // {state}
	deadLetters      prometheus.Counter     //
	deadLetterErrors prometheus.Counter     //
	commitErrors     prometheus.Counter     //
	generations      prometheus.Counter     //
	series           prometheus.GaugeFunc   //
	seriesRefused    prometheus.CounterFunc //
	all              []prometheus.Collector // for registration
	rejectedBy       [event.NumReasons]prometheus.Counter
	skippedBy        [event.NumReasons]prometheus.Counter
}

// newCounter, newCounterVec and newGaugeVec make the collectors of this package (here and
// in snapshot.go) that take only a name, labels and help.
func newCounter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func newCounterVec(name string, labels []string, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func newGaugeVec(name string, labels []string, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

func newMetrics(store *window.Store) *metrics {
	m := &metrics{
		events: newCounterVec("slide_ingest_events_total", []string{"partition"},
			"Events accepted into the windows, by source partition; replays after an assignment count again."),
		bytes: newCounterVec("slide_ingest_bytes_total", []string{"partition"},
			"Record value bytes fetched, by partition."),
		lag: newGaugeVec("slide_ingest_lag", []string{"partition"},
			"Records between the last processed offset and the end the consumer can read at the last fetch (the last stable offset under read_committed, else the high watermark), updated within a batch as it is processed."),
		lagSeconds: newGaugeVec("slide_ingest_lag_seconds", []string{"partition"},
			"How far behind the log this instance reads, by partition: the age of the last record processed while records wait behind it, 0 when caught up. Alert on this one."),
		rejected: newCounterVec("slide_ingest_rejected_total", []string{"reason"},
			"Events refused, by reason (invalid_json, missing_field, bad_field, invalid_value, key_too_long, future, late, series_cap, too_large, expired, bad_record)."),
		restoreSkipped: newCounterVec("slide_ingest_restore_skipped_total", []string{"reason"},
			"Events refused again while replaying records the group had already processed (counted and dead-lettered then), by reason."),
		expired: newCounter("slide_ingest_expired_total",
			"Events within their window when produced but older than it when read (consumer lag, or a replay reaching further back than the metric's retention): skipped, not refused."),
		offsetResets: newCounterVec("slide_ingest_offset_resets_total", []string{"partition", "reason"},
			"Times a partition's next offset was out of the log's range and reading moved to the first record of the restore span that the log still holds, by partition and reason (retention: deleted before it was read; log_truncated: the log ends before it, e.g. a broker restarted empty or an unclean leader election)."),
		tombstones: newCounter("slide_ingest_tombstones_total",
			"Records that carry no event: a null value (a Kafka tombstone) or only blank lines. Skipped, not refused and not dead-lettered; counted once, not again when a restore replays them."),
		restoreDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "slide_ingest_restore_duration_seconds",
			Help:    "Time from a partition's assignment until its windows are restored (from a snapshot and the log after it, or from the log alone) and it is live; slide_snapshot_restore_duration_seconds{source} says which.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 9), // 10 ms … 11 min
		}),
		partitions: newGaugeVec("slide_ingest_partitions", []string{"state"},
			"Partitions assigned to this instance, by state (restoring, live)."),
		deadLetters: newCounter("slide_ingest_dead_letters_total",
			"Refused lines written to the dead-letter topic."),
		deadLetterErrors: newCounter("slide_ingest_dead_letter_errors_total",
			"Refused lines that could not be written to the dead-letter topic."),
		commitErrors: newCounter("slide_ingest_commit_errors_total",
			"Offset commits that failed (offsets are committed for lag monitoring only)."),
		generations: newCounter("slide_ingest_generations_total",
			"Consumer group generations joined (the first join and every rebalance)."),
		series: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "slide_ingest_series",
			Help: "Live series in the window store.",
		}, func() float64 { return float64(store.Len()) }),
		seriesRefused: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "slide_ingest_series_refused_total",
			Help: "Events refused by the window store because their new series would pass a series cap (--max-series, --max-memory or a metric's --max-series-per-metric).",
		}, func() float64 { return float64(store.Stats().Refused) }),
	}
	for _, r := range event.RejectReasons() {
		m.rejectedBy[r] = m.rejected.WithLabelValues(r.String())
		m.skippedBy[r] = m.restoreSkipped.WithLabelValues(r.String())
	}
	m.partitions.WithLabelValues("restoring")
	m.partitions.WithLabelValues("live")
	m.all = []prometheus.Collector{m.events, m.bytes, m.lag, m.lagSeconds, m.rejected, m.restoreSkipped, m.expired, m.tombstones, m.offsetResets, m.restoreDuration,
		m.partitions, m.deadLetters, m.deadLetterErrors, m.commitErrors, m.generations, m.series, m.seriesRefused}
	return m
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range m.all {
		if err := reg.Register(c); err != nil {
			for _, done := range m.all {
				if done == c {
					break
				}
				reg.Unregister(done)
			}
			return fmt.Errorf("registering ingest metrics: %w", err)
		}
	}
	return nil
}
