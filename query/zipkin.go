package query

import (
	"net/http"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/httperr"
)

// handleZipkinSpans serves POST /api/v2/spans, Zipkin's span API: what a Zipkin reporter's HTTP
// sender posts (Brave's and Spring's with zipkin's endpoint set to slide, zipkin-go's), a list
// of v2 spans in JSON (application/json) or proto3 (application/x-protobuf), gzip-compressed
// or not, each span an event as --event-format zipkin_json and zipkin_proto read them from
// Kafka, into this instance's windows as POST /v1/events' are (they are not in the log). The
// answer is 202 Accepted, as Zipkin's server answers, with POST /v1/events' body (accepted,
// refused by reason, the first of each: reporters ignore it, curl shows it); 400 for a body
// that is not a span list (nothing of it recorded); 415 for another Content-Type; 413 past
// MaxBodyBytes.
func (s *Server) handleZipkinSpans(w http.ResponseWriter, r *http.Request) {
	// Zipkin's server takes a body without a type as JSON.
	_, in, body, ok := s.intakeBody(w, r, s.cfg.Zipkin, "application/json", "Zipkin's spans are application/json or application/x-protobuf (proto3)", slideFail)
	if !ok {
		return
	}
	defer body.release()
	res := in.Take(body.b, s.now())
	if res.Refused[event.ReasonBadRecord] > 0 && res.Accepted == 0 {
		s.metrics.events.WithLabelValues(event.ReasonBadRecord.String()).Add(float64(res.Refused[event.ReasonBadRecord]))
		httperr.Write(w, httperr.BadBody, "", "not a list of Zipkin v2 spans: "+res.First[event.ReasonBadRecord])
		return
	}
	s.answerTaken(w, http.StatusAccepted, res)
}
