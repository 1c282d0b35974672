package window

// Event is one observation of a series. TS is unix milliseconds; Count 0 means 1. The zero
// value of every field is safe: Feed 0 is no feed.
type Event struct {
	TS     int64
	Metric string
	Key    string
	Value  float64
	Count  uint64
	Feed   Feed // the feed that carried it (FeedOf); a series remembers that of the last event it accepted

	// TraceID and SpanID name the span the event was read from, or the trace of the request
	// an access-log line records (a span format's decoder fills them, an event map's trace
	// field or an OTLP log record's ids; all zero: none). A store with StoreConfig.Exemplars keeps, per slot, the
	// accepted event of the largest value that has a trace id (VisitExemplars); otherwise
	// they are ignored.
	TraceID [16]byte
	SpanID  [8]byte
}

// Feed names what carried an event in, so that what one feed built can be dropped
// (DropPartition) or snapshotted (AppendSnapshot) as a unit. Its zero value is no feed (the
// API, a file, a test): such series are never dropped with a feed. The feed numbered p ≥ 0
// (for ingest, a Kafka partition) is FeedOf(p).
type Feed uint32

// FeedOf is the Feed numbered p; a negative p is no feed.
func FeedOf(p int32) Feed {
	if p < 0 {
		return 0
	}
	return Feed(p) + 1
}

// Partition is the number FeedOf was given, or -1 for no feed: the number the store's
// per-feed calls (DropPartition, AppendSnapshot, SeriesMatch) take.
func (f Feed) Partition() int32 { return int32(f) - 1 }
