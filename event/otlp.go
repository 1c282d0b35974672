package event

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/slide-metrics/slide/jsonenc"
	"github.com/slide-metrics/slide/textparse"
	"github.com/slide-metrics/slide/window"
)

// OTLP traces (otlp.go: the event a span makes; otlp_proto.go, otlp_json.go: the two wire
// formats the OpenTelemetry Collector's kafka exporter writes, one ExportTraceServiceRequest a
// record). Each span is one event of metric SpanMetric, its value the span's duration in
// fractional milliseconds, its ts the span's end (unix ms); its key the resource attribute
// SpanConfig.KeyAttribute (service.name), its labels span_name, span_kind, status_code and the
// SpanConfig.Dimensions attributes (the span's first, then the resource's); its TraceID and
// SpanID the span's ids (none for an all-zero trace id or an invalid id, which never refuses
// the span: the store's exemplars, window.StoreConfig.Exemplars). A body is read in
// one pass into the decoder's pending spans, then handed on span by span: a body that is not
// its format's is refused whole, one ReasonBadRecord, and none of its spans counted.

// SpanMetric is the metric of a span's event.
const SpanMetric = "duration_ms"

// DefaultSpanKey is the resource attribute a span's key is, by default.
const DefaultSpanKey = "service.name"

// The labels every span's event carries (an empty span name is none).
const (
	LabelSpanName   = "span_name"
	LabelSpanKind   = "span_kind"
	LabelStatusCode = "status_code"
)

// maxAnyDepth bounds the nesting of an attribute's AnyValue (arrays and maps in arrays and
// maps): a record nesting deeper is refused whole (ReasonBadRecord), so that a hostile record
// cannot take the stack.
const maxAnyDepth = 32

// maxSpanDims is how many dimensions a span's event carries at most, besides its three labels.
const maxSpanDims = window.MaxLabels - 3

var spanKinds = [...]string{"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"}

var statusCodes = [...]string{"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"}

// SpanConfig configures the OTLP formats (NewOTLPProto, NewOTLPJSON). The zero value means
// the defaults: the key is service.name, no dimensions.
type SpanConfig struct {
	// Config bounds the key's length and the intern table, as for slide's JSON.
	Config
	// KeyAttribute is the resource attribute that is an event's key. Default DefaultSpanKey.
	KeyAttribute string
	// Dimensions are span or resource attributes that become labels, named by SpanLabelName
	// (http.route → http_route), at most 13.
	Dimensions []string
}

// Validate reports a config the OTLP formats would refuse.
func (c SpanConfig) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if len(c.Dimensions) > maxSpanDims {
		return fmt.Errorf("%d span dimensions: at most %d", len(c.Dimensions), maxSpanDims)
	}
	seen := map[string]string{LabelSpanName: "", LabelSpanKind: "", LabelStatusCode: "", "key": ""}
	for _, a := range c.Dimensions {
		n := SpanLabelName(a)
		if a == "" || !window.ValidLabelName(n) {
			return fmt.Errorf("span dimension %q: label name %q is not one (names start with a letter, not __, and are not key)", a, n)
		}
		if prev, ok := seen[n]; ok {
			if prev == "" {
				return fmt.Errorf("span dimension %q: label %q is one of a span's own", a, n)
			}
			return fmt.Errorf("span dimensions %q and %q: both are label %q", prev, a, n)
		}
		seen[n] = a
	}
	return nil
}

// SpanLabelName is the label name of attribute a, as Prometheus' OTLP translation names it: every
// character outside [a-zA-Z0-9_] becomes _, and a name starting with a digit gets the prefix
// key_ (http.route → http_route, 1x → key_1x).
func SpanLabelName(a string) string {
	b := []byte(a)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 0 && b[0] >= '0' && b[0] <= '9' {
		return "key_" + string(b)
	}
	return string(b)
}

// SpanDecoder reads OTLP trace requests into events, one per span: a Format. It reuses slide
// JSON's Decoder for what every format shares (the intern table, the label scratch, series
// strings and the name rules), so a span's event is held to the rules of the package doc.
// Decoding allocates nothing per span once its key and series are interned. Not safe for
// concurrent use; the zero value is not usable: NewOTLPProto or NewOTLPJSON.
type SpanDecoder struct {
	json    bool // OTLP/JSON, or Zipkin's JSON with zipkin
	zipkin  bool // Zipkin's JSON v2 (zipkin.go)
	zCode   int  // Zipkin: the slot of http.response.status_code, which the tag http.status_code fills, or −1
	zPeer   int  // Zipkin: the slot of service.peer.name, which remoteEndpoint.serviceName fills, or −1
	d       *Decoder
	keyAttr string
	dims    []spanDim
	pending []pendingSpan
	evs     []*window.Event          // the pending spans' events to observe (observeAll)
	errs    []error                  // their results
	emit    bool                     // handing pending spans on: a part given back is one of them
	body    []byte                   // the body pending came from
	pbScan                           // why the body is not a request (bad)
	res     [1 + maxSpanDims]attrVal // the resource's key attribute and dimensions
	span    spanFields
	order   []spanLabel                  // the labels in the order of their names
	ser     []byte                       // the series string being written
	raw     []byte                       // a span's parts as read (appendRaw)
	seen    map[string]string            // series strings by the parts they were written from, at most MaxInterned
	recent  *[1 << recentBits]recentSlot // a cache of seen (otlp_recent.go), looked at first
	rcur    recentSlot                   // the words of the span being read
	rslot   int                          // its slot of recent, or −1
	rres    recentRes                    // the resource's words, while its spans are read
	num     []byte                       // an attribute value as text
	lossy   bool                         // text replaced invalid UTF-8 in an escaped JSON string
	scratch []byte                       // unescaped JSON strings
	jsc     jsonScan
	// dimOfLen is by length the dimension with a name that long: 0 none, 1+i dimension i,
	// 255 several.
	dimOfLen [64]uint8
}

// spanDim is a dimension: its attribute and its label's name.
type spanDim struct{ attr, label string }

// pendingSpan is a span read from the body: its bytes, its event and Reason, and for a
// refusal what to say.
type pendingSpan struct {
	part []byte
	ev   window.Event
	r    Reason
	why  spanWhy
}

// spanWhy is what refused a span: what, the label it is about (span_name for −1, else the
// dimension) and a number it says.
type spanWhy struct {
	what  uint8
	about int8
	n     int
}

const (
	whyNone uint8 = iota
	whyNoKey
	whyKeyTooLong
	whyKeyBad
	whyEndBeforeStart
	whyValueTooLong
	whyValueBad
	whyKind
	whyStatus
	whyNoTimestamp // Zipkin: a span without its timestamp
	whyNoDuration  // Zipkin: a span without its duration
	whyTimeRange   // Zipkin: timestamp + duration past what nanoseconds since 1970 hold
)

// badRecord is why a body was refused whole: what and where (a byte offset).
type badRecord struct {
	what string
	at   int
}

// attrVal is an attribute's value as read: absent, a string (its bytes in the body, escaped
// in JSON or not), an integer, a boolean, a double, or another type (an array, a map, bytes),
// which gives no label. Only the fields of its kind are read (b and esc for a string, i for
// an integer or boolean, f for a double): the others may hold an earlier value's.
type attrVal struct {
	kind uint8
	esc  bool
	b    []byte
	i    int64
	f    float64
}

const (
	valAbsent uint8 = iota
	valString
	valInt
	valBool
	valDouble
	valOther
)

// spanFields is what a span's event is made of, as read from either wire format.
type spanFields struct {
	idFields
	name       attrVal // a string
	kind       int64
	status     int64
	start, end uint64
	dims       [maxSpanDims]attrVal // from the span's attributes
	miss       uint8                // a why that refuses the span whatever its key (Zipkin's timing), or whyNone
}

// idFields are a span's or a log record's ids as read (setID, setHexID, setZipkinID): its
// events' TraceID and SpanID when its trace id is not all zero and no id was invalid (badID;
// ids). An invalid id never refuses a span or a record (OTLP reads one as empty): its events
// carry no ids.
type idFields struct {
	traceID [16]byte
	spanID  [8]byte
	badID   bool
}

// ids are the ids the events take, and whether there are any: none when the trace id is all
// zero or an id was invalid.
func (sp *idFields) ids() ([16]byte, [8]byte, bool) {
	if sp.badID || sp.traceID == [16]byte{} {
		return [16]byte{}, [8]byte{}, false
	}
	return sp.traceID, sp.spanID, true
}

// clearIDs forgets the ids of the span read before: a span without ids has none.
func (sp *idFields) clearIDs() {
	sp.traceID, sp.spanID, sp.badID = [16]byte{}, [8]byte{}, false
}

// setID reads id, a trace or span id as protobuf's bytes, into dst (sp.traceID or
// sp.spanID): an id of dst's length, or none (empty: zero, as OTLP's empty id); an id of
// any other length makes the span's ids invalid.
func (sp *idFields) setID(dst, id []byte) {
	switch len(id) {
	case len(dst):
		copy(dst, id)
	case 0:
		clear(dst)
	default:
		sp.badID = true
	}
}

// setWireID reads the id of protobuf field f of b into dst as setID does; a field of another
// wire type is an invalid id, not a malformed record.
func (sp *idFields) setWireID(dst, b []byte, f pbField) {
	if f.wt != wtLen {
		sp.badID = true
		return
	}
	sp.setID(dst, b[f.vs:f.ve])
}

// setHexID reads v, an id as OTLP/JSON's hex string (either case), into dst: 2·len(dst)
// digits, or "" for none; anything else (another length or byte, an escape, not a string)
// makes the span's ids invalid.
func (sp *idFields) setHexID(dst []byte, v attrVal) {
	switch {
	case v.kind == valString && !v.esc && len(v.b) == 0:
		clear(dst)
	case v.kind != valString || v.esc || len(v.b) != 2*len(dst) || !hexID(dst, v.b):
		sp.badID = true
	}
}

// setZipkinID reads v, an id as Zipkin's JSON hex string, into dst as the Collector's zipkin
// receiver (zipkin-go) reads it: a hex number that fits dst, right-aligned (a 64-bit trace id
// of 16 digits is the last 8 bytes of the trace id, as the receiver places it), leading
// zeros allowed; anything else makes the span's ids invalid.
func (sp *idFields) setZipkinID(dst []byte, v attrVal) {
	t := v.b
	for len(t) > 1 && t[0] == '0' {
		t = t[1:]
	}
	if v.kind != valString || v.esc || len(t) == 0 || !hexID(dst, t) {
		sp.badID = true
	}
}

// hexID decodes t, hex digits of either case, right-aligned into dst, its high bytes zero;
// false when t holds another byte or more digits than dst holds.
func hexID(dst, t []byte) bool {
	if len(t) > 2*len(dst) {
		return false
	}
	clear(dst)
	for k := range len(t) {
		c := t[len(t)-1-k]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return false
		}
		dst[len(dst)-1-k/2] |= c << (4 * (k % 2))
	}
	return true
}

// NewOTLPProto returns a decoder of OTLP/protobuf: each body one ExportTraceServiceRequest in
// protobuf's binary encoding, as the Collector's kafka exporter writes by default (otlp_proto).
func NewOTLPProto(cfg SpanConfig) (*SpanDecoder, error) { return newSpanDecoder(cfg, false) }

// NewOTLPJSON returns a decoder of OTLP/JSON: each body one ExportTraceServiceRequest in
// OTLP's JSON encoding (otlp_json).
func NewOTLPJSON(cfg SpanConfig) (*SpanDecoder, error) { return newSpanDecoder(cfg, true) }

func newSpanDecoder(cfg SpanConfig, json bool) (*SpanDecoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("span config: %w", err)
	}
	d, err := NewDecoder(cfg.Config)
	if err != nil {
		return nil, err
	}
	s := &SpanDecoder{json: json, d: d, keyAttr: cfg.KeyAttribute, seen: map[string]string{}, recent: new([1 << recentBits]recentSlot)}
	if s.keyAttr == "" {
		s.keyAttr = DefaultSpanKey
	}
	s.order = []spanLabel{{name: LabelSpanKind, src: srcKind}, {name: LabelSpanName, src: srcName}, {name: LabelStatusCode, src: srcStatus}}
	for i, a := range cfg.Dimensions {
		s.dims = append(s.dims, spanDim{attr: a, label: SpanLabelName(a)})
		s.order = append(s.order, spanLabel{name: SpanLabelName(a), src: i})
		if n := len(a); n < len(s.dimOfLen) {
			if s.dimOfLen[n] == 0 {
				s.dimOfLen[n] = uint8(1 + i)
			} else {
				s.dimOfLen[n] = 255
			}
		}
	}
	slices.SortFunc(s.order, func(a, b spanLabel) int { return strings.Compare(a.name, b.name) })
	for i := range s.order {
		s.order[i].prefix = appendSeriesLabel(nil, s.order[i].name, []byte{0})
		s.order[i].prefix = s.order[i].prefix[:len(s.order[i].prefix)-1] // the series encoding's, less the value
	}
	return s, nil
}

// DecodeLines reads body, one ExportTraceServiceRequest, and calls fn once per span with the
// span's bytes, its event and Reason; a body that is not a request is one call, with the body
// and ReasonBadRecord. defaultTS is not used: a span's ts is its end. An empty body is no
// event (a tombstone). A part DecodeLines handed to fn, given back while fn runs, decodes to
// what it did (Intake.Explain does so).
func (s *SpanDecoder) DecodeLines(body []byte, defaultTS int64, fn func(part []byte, ev window.Event, r Reason)) int {
	if s.emit { // a part given back while fn runs: nothing else is read then
		k := s.pendingOf(body)
		if k < 0 {
			return 0
		}
		p := &s.pending[k]
		fn(p.part, p.ev, p.r)
		return 1
	}
	if len(body) == 0 {
		return 0
	}
	s.read(body)
	s.emit = true
	for k := range s.pending {
		p := &s.pending[k]
		fn(p.part, p.ev, p.r)
	}
	s.emit = false
	return len(s.pending)
}

// read reads body into s.pending.
func (s *SpanDecoder) read(body []byte) {
	s.pending, s.body, s.bad = s.pending[:0], body, badRecord{}
	s.rres.on = false
	var ok bool
	if s.zipkin && s.json {
		ok = s.readZipkin(body)
	} else if s.zipkin {
		ok = s.readZipkinProto(body)
	} else if s.json {
		ok = s.readJSON(body)
	} else {
		ok = s.readProto(body)
	}
	if !ok {
		s.pending = append(s.pending[:0], pendingSpan{part: body, r: ReasonBadRecord})
	}
}

// pendingOf is the index of the pending span whose bytes part is, or −1.
func (s *SpanDecoder) pendingOf(part []byte) int {
	if len(part) == 0 {
		return -1
	}
	for k := range s.pending {
		if p := s.pending[k].part; len(p) == len(part) && &p[0] == &part[0] {
			return k
		}
	}
	return -1
}

// Where says where part is in body: "the record" for a body refused whole, "span N" (from 1,
// in the request's order) for a span's bytes. A Locator.
func (s *SpanDecoder) Where(body, part []byte) string {
	if k := s.pendingOf(part); k >= 0 {
		if s.pending[k].r == ReasonBadRecord {
			return "the record"
		}
		return "span " + strconv.Itoa(k+1)
	}
	return "the record"
}

// Explain says why part was refused: part is a span's bytes DecodeLines handed on (while its
// callback runs) or a body. Only what the spans carry is said (`resource attribute
// "service.name": absent`, `end before start by 2ms`, `malformed protobuf: length past the
// record at byte 17`); "" when it was not refused.
func (s *SpanDecoder) Explain(part []byte) string {
	k := s.pendingOf(part)
	if k < 0 && s.emit {
		return ""
	}
	if k < 0 {
		s.read(part)
		if len(s.pending) == 0 {
			return ""
		}
		k = 0
		for i := range s.pending {
			if s.pending[i].r != ReasonNone {
				k = i
				break
			}
		}
	}
	p := &s.pending[k]
	if p.r == ReasonBadRecord {
		why := s.bad.what + " at byte " + strconv.Itoa(s.bad.at) + s.otherJSON(part)
		switch {
		case !s.json && s.zipkin && len(part) > 0 && (part[0] == '[' || part[0] == '{'):
			why += " (the record is JSON text, not protobuf: Zipkin's JSON? --event-format zipkin_json)"
		case !s.json && len(part) > 0 && part[0] == '{':
			// A topic of slide's JSON (or OTLP/JSON) read as otlp_proto.
			why += " (the record is JSON text, not protobuf: slide's JSON events, or OTLP/JSON?)"
		}
		return why
	}
	w := p.why
	switch w.what {
	case whyNoKey:
		return "resource attribute " + strconv.Quote(s.keyAttr) + ": absent"
	case whyKeyTooLong:
		return "resource attribute " + strconv.Quote(s.keyAttr) + ": " + strconv.Itoa(w.n) + " bytes, more than " + strconv.Itoa(s.d.maxKey)
	case whyKeyBad:
		return "resource attribute " + strconv.Quote(s.keyAttr) + ": not valid UTF-8, or holds a control or bidi character"
	case whyEndBeforeStart:
		return "end before start by " + strconv.FormatFloat(float64(w.n)/1e6, 'f', -1, 64) + "ms"
	case whyValueTooLong:
		return "label " + strconv.Quote(s.labelName(w.about)) + ": value of " + strconv.Itoa(w.n) + " bytes, more than " + strconv.Itoa(window.MaxLabelValueLen)
	case whyValueBad:
		return "label " + strconv.Quote(s.labelName(w.about)) + ": value not valid UTF-8, or holds a control or bidi character"
	case whyKind:
		return "span kind " + strconv.Itoa(w.n) + ": not an OTLP SpanKind"
	case whyStatus:
		return "status code " + strconv.Itoa(w.n) + ": not an OTLP StatusCode"
	case whyNoTimestamp:
		return `no "timestamp" (µs since 1970): a span without its start cannot be placed in a window`
	case whyNoDuration:
		return `no "duration": an unfinished span, or the half of a shared span that its other half measures`
	case whyTimeRange:
		return `"timestamp" + "duration" past year 2262 (µs since 1970 are read)`
	}
	return ""
}

// labelName is the name of label about: span_name for −1, else dimension about's.
func (s *SpanDecoder) labelName(about int8) string {
	if about < 0 || int(about) >= len(s.dims) {
		return LabelSpanName
	}
	return s.dims[about].label
}

// attrSlot is where the value of the attribute named name is kept: 0 the key attribute
// (a resource's, withKey), 1+i dimension i; −1 for an attribute the decoder does not keep.
func (s *SpanDecoder) attrSlot(name []byte, withKey bool) int {
	if withKey && string(name) == s.keyAttr {
		return 0
	}
	if n := len(name); n < len(s.dimOfLen) {
		switch i := s.dimOfLen[n]; i {
		case 0: // no dimension's name is n bytes long
			return -1
		case 255: // several are: the loop below
		default:
			if string(name) == s.dims[i-1].attr {
				return int(i)
			}
			return -1
		}
	}
	for i := range s.dims {
		if string(name) == s.dims[i].attr {
			return 1 + i
		}
	}
	return -1
}

// spanEvent makes the pending span of f, the span's bytes part, under the resource's values.
// The pending span is written in place, field by field (event writes its event's): a
// pendingSpan literal appended is built on the stack and copied whole, with the write
// barrier's bulk pass over its pointers while the collector marks.
func (s *SpanDecoder) spanEvent(part []byte) {
	n := len(s.pending)
	if n == cap(s.pending) {
		s.pending = append(s.pending, pendingSpan{})
	}
	s.pending = s.pending[:n+1]
	p := &s.pending[n]
	p.part, p.r, p.why = part, ReasonNone, spanWhy{}
	s.event(&s.span, p)
}

// text is v as a label's text: a string's bytes (unescaped, s.lossy set when that replaced
// invalid UTF-8), an integer, boolean or double written as pdata's AsString writes it; nil for
// an absent value or another type. It is valid until the next call.
func (s *SpanDecoder) text(v *attrVal) []byte {
	s.lossy = false
	switch v.kind {
	case valString:
		if v.esc {
			s.scratch, s.lossy = textparse.Unquote(s.scratch[:0], v.b)
			return s.scratch
		}
		return v.b
	case valInt:
		s.num = strconv.AppendInt(s.num[:0], v.i, 10)
	case valBool:
		s.num = strconv.AppendBool(s.num[:0], v.i != 0)
	case valDouble:
		s.num = appendES6(s.num[:0], v.f)
	default:
		return nil
	}
	return s.num
}

// appendES6 writes f as pdata's AsString does (ECMAScript's number to string, as
// encoding/json writes a float): NaN and ±Infinity by name.
func appendES6(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	}
	return jsonenc.AppendFloat(b, f) // finite: encoding/json's form, as ECMAScript's
}

// parseSpecial is the double a JSON string "NaN", "Infinity" or "-Infinity" names.
func parseSpecial(t []byte) float64 {
	switch string(t) {
	case "NaN":
		return math.NaN()
	case "Infinity":
		return math.Inf(1)
	}
	return math.Inf(-1)
}
