package query

import (
	"context"
	"net/http"
)

// scanCheck is how many series a read visits between two looks at its request's context:
// often enough that a read over a million series stops within a few thousand of them once
// the client has gone, rarely enough that the check costs nothing measurable.
const scanCheck = 256

// scan counts the series one read visits and tells the read to stop once the request's
// context is done: the client left, so nobody reads the answer and finishing it is wasted
// work a client could repeat at will; or Config.ReadTimeout passed, which the route
// wrapper answers with a 503 timeout. Not safe for concurrent use: one per request.
type scan struct {
	ctx   context.Context
	n     int
	done  bool
	visit func() // Server.visit, a test hook
}

func (s *Server) scan(r *http.Request) *scan {
	return &scan{ctx: r.Context(), visit: s.visit}
}

// stop is called once per series visited and reports whether the read should stop. It
// looks at the context on the first series and every scanCheck after, so a request
// cancelled before it started visits one series at most.
func (sc *scan) stop() bool {
	if sc.done {
		return true
	}
	if sc.visit != nil {
		sc.visit()
	}
	if sc.n%scanCheck == 0 && sc.ctx.Err() != nil {
		sc.done = true
	}
	sc.n++
	return sc.done
}

// gone reports whether the read stopped because the request is done.
func (sc *scan) gone() bool { return sc.done || sc.ctx.Err() != nil }
