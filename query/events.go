package query

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/slide-metrics/slide/internal/jsonenc"
)

// eventsBufPool holds request bodies of POST /v1/events, up to MaxBodyBytes each.
var eventsBufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// handleEvents serves POST /v1/events: an NDJSON body of events for users without Kafka.
// The whole body is read before any event is recorded, so a body over MaxBodyBytes is
// refused with 413 and records nothing. The answer counts accepted events and refused ones
// by reason: {"accepted": 98, "rejected": {"invalid_json": 2}}. Refusals are not an HTTP
// error; like Kafka input, a bad line never fails its neighbours.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Events == nil {
		writeError(w, http.StatusNotImplemented, CodeNotConfigured, "", "no event sink is configured on this server")
		return
	}
	if _, err := parseParams(r.URL.RawQuery); err != nil {
		s.writeErr(w, r, err)
		return
	}
	limit := s.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		writeTooLarge(w, limit)
		return
	}
	buf := eventsBufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= int(limit)+bytes.MinRead {
			eventsBufPool.Put(buf)
		}
	}()
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeTooLarge(w, limit)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, CodeBadBody, "", "reading body: "+err.Error())
		return
	}
	res, err := s.cfg.Events.IngestNDJSON(r.Context(), buf.Bytes(), s.now())
	if err != nil {
		s.cfg.Logger.Warn("ingesting events", "err", err)
		writeError(w, http.StatusInternalServerError, CodeInternal, "", "ingesting events: "+err.Error())
		return
	}
	s.metrics.events.WithLabelValues("accepted").Add(float64(res.Accepted))
	for reason, n := range res.Rejected {
		s.metrics.events.WithLabelValues(reason).Add(float64(n))
	}
	bp := bufPool.Get().(*[]byte)
	b := append((*bp)[:0], `{"accepted":`...)
	b = appendInt(b, int64(res.Accepted))
	b = append(b, `,"rejected":{`...)
	reasons := make([]string, 0, len(res.Rejected))
	for reason, n := range res.Rejected {
		if n > 0 {
			reasons = append(reasons, reason)
		}
	}
	slices.Sort(reasons)
	for i, reason := range reasons {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, reason)
		b = append(b, ':')
		b = appendInt(b, int64(res.Rejected[reason]))
	}
	b = append(b, "}}\n"...)
	writeJSON(w, http.StatusOK, b)
	putBuf(bp, b)
}

func writeTooLarge(w http.ResponseWriter, limit int64) {
	// The rest of the body is not read: close the connection rather than drain it.
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "",
		"body larger than "+strconv.FormatInt(limit, 10)+" bytes; split the events over several requests")
}
