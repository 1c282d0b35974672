package query

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/httperr"
	"github.com/slide-metrics/slide/jsonenc"
)

// eventsBufPool holds request bodies of POST /v1/events, up to MaxBodyBytes each.
var eventsBufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// rejectedOrder is every refusal reason by name: the order of the answer's "rejected".
var rejectedOrder = func() []event.Reason {
	rs := event.RejectReasons()
	slices.SortFunc(rs, func(a, b event.Reason) int { return strings.Compare(a.String(), b.String()) })
	return rs
}()

// handleEvents serves POST /v1/events: an NDJSON body of events for users without Kafka.
// The whole body is read before any event is recorded, so a body over MaxBodyBytes is
// refused with 413 and records nothing: at once when its Content-Length says so, else when
// reading passes the limit. The rest of a refused body is then drained (see MaxDrainBytes)
// so that clients which write the whole request before reading (Python's urllib and
// requests) get the 413 instead of a connection reset. The answer counts accepted events and refused ones
// by reason, and says the first refusal of each reason with its line and what is wrong
// (event.Result.First): {"accepted": 98, "rejected": {"invalid_json": 2}, "first":
// {"invalid_json": "line 3: invalid JSON: …"}}, "first" only when a line was refused.
// Refusals are not an HTTP error; like Kafka input, a bad line never fails its neighbours.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Events == nil {
		httperr.Write(w, httperr.NotConfigured, "", "no event sink is configured on this server")
		return
	}
	if _, err := parseParams(r.URL.RawQuery); err != nil {
		s.writeErr(w, r, err)
		return
	}
	body, ok := s.readBody(w, r, slideFail)
	if !ok {
		return
	}
	defer body.release()
	s.answerTaken(w, http.StatusOK, s.intakeOf(r).Take(body.b, s.now()))
}

// answerTaken counts what became of a body's events (slide_http_events_total) and answers
// with it: how many were accepted, how many refused by reason, and each reason's first case.
func (s *Server) answerTaken(w http.ResponseWriter, status int, res event.Result) {
	s.metrics.events.WithLabelValues("accepted").Add(float64(res.Accepted))
	bp := bufPool.Get().(*[]byte)
	b := append((*bp)[:0], `{"accepted":`...)
	b = appendInt(b, int64(res.Accepted))
	b = append(b, `,"rejected":{`...)
	sep := false
	for _, reason := range rejectedOrder {
		n := res.Refused[reason]
		if n == 0 {
			continue
		}
		s.metrics.events.WithLabelValues(reason.String()).Add(float64(n))
		if sep {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, reason.String())
		b = append(b, ':')
		b = appendInt(b, int64(n))
		sep = true
	}
	b = append(b, '}')
	if sep { // the first refusal of each reason, said in full
		b = append(b, `,"first":{`...)
		sep = false
		for _, reason := range rejectedOrder {
			if res.Refused[reason] == 0 {
				continue
			}
			if sep {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, reason.String())
			b = append(b, ':')
			b = jsonenc.AppendString(b, res.First[reason])
			sep = true
		}
		b = append(b, '}')
	}
	b = append(b, "}\n"...)
	writeJSON(w, status, b)
	putBuf(bp, b)
}

// Draining a refused body: at most MaxDrainBytes more are read, within drainTime.
const (
	// MaxDrainBytes is how much of a body refused with 413 is still read and discarded, so
	// that a client writing its whole request before reading the answer finishes writing
	// and reads the 413. A longer body (by its Content-Length, or found while draining) is
	// cut off: the connection closes and such a client sees a reset. Clients that send
	// "Expect: 100-continue" (curl for large bodies) get the 413 before sending anything.
	MaxDrainBytes = 32 << 20
	drainTime     = 10 * time.Second
)

// refuseTooLarge answers 413 at once, then drains what the client still sends (bounded by
// MaxDrainBytes and drainTime) and closes the connection. The answer goes first and is
// flushed, so a client that reads while it writes sees it early; full duplex lets the
// handler read the body after answering.
func refuseTooLarge(w http.ResponseWriter, r *http.Request, limit int64, fail failFunc) {
	rc := http.NewResponseController(w)
	drain := !strings.EqualFold(r.Header.Get("Expect"), "100-continue") &&
		(r.ContentLength < 0 || r.ContentLength <= limit+MaxDrainBytes) &&
		rc.EnableFullDuplex() == nil
	w.Header().Set("Connection", "close")
	fail(w, httperr.BodyTooLarge, "body larger than "+strconv.FormatInt(limit, 10)+" bytes; split the events over several requests")
	if !drain {
		return
	}
	_ = rc.Flush()
	_ = rc.SetReadDeadline(time.Now().Add(drainTime))
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, MaxDrainBytes))
}

// intakeOf is the intake of r's body by its Content-Type (Config.EventsByType), else Events.
func (s *Server) intakeOf(r *http.Request) *event.Intake {
	if len(s.cfg.EventsByType) == 0 {
		return s.cfg.Events
	}
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	if in, ok := s.cfg.EventsByType[strings.ToLower(strings.TrimSpace(ct))]; ok {
		return in
	}
	return s.cfg.Events
}
