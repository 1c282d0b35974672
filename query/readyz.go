package query

import (
	"encoding/json"
	"net/http"

	"github.com/slide-metrics/slide/httperr"
)

// readyzBackends answers /readyz with each backend's state beside the usual body:
// {"status":"ready","backends":[…]}, or the not_ready error with "backends" added after
// the error object.
func (s *Server) readyzBackends(w http.ResponseWriter) {
	backends, err := json.Marshal(s.cfg.Backends())
	if err != nil {
		httperr.Write(w, httperr.Internal, "", err.Error())
		return
	}
	var ready error
	if s.cfg.Ready != nil {
		ready = s.cfg.Ready()
	}
	if ready == nil {
		writeJSON(w, http.StatusOK, append(append([]byte(`{"status":"ready","backends":`), backends...), "}\n"...))
		return
	}
	b := httperr.AppendOpen(nil, httperr.NotReady, "", "not ready: "+ready.Error())
	b = append(append(append(b, `},"backends":`...), backends...), "}\n"...)
	httperr.Send(w, httperr.NotReady, b)
}
