package query

import (
	"encoding/json"
	"net/http"
)

// readyzBackends answers /readyz with each backend's state beside the usual body:
// {"status":"ready","backends":[…]}, or the not_ready error with "backends" added.
func (s *Server) readyzBackends(w http.ResponseWriter) {
	var body struct {
		Status   string         `json:"status,omitempty"`
		Error    *readyzError   `json:"error,omitempty"`
		Backends []BackendState `json:"backends"`
	}
	body.Backends = s.cfg.Backends()
	code := http.StatusOK
	body.Status = "ready"
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(); err != nil {
			code, body.Status = http.StatusServiceUnavailable, ""
			body.Error = &readyzError{Code: CodeNotReady, Message: "not ready: " + err.Error()}
			w.Header().Set("Retry-After", "1")
		}
	}
	b, err := json.Marshal(body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, CodeInternal, "", err.Error())
		return
	}
	writeJSON(w, code, append(b, '\n'))
}

type readyzError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
