package query

import (
	"encoding/json"
	"net/http"
	"strconv"

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
		b := s.appendRestoring([]byte(`{"status":"ready"`))
		writeJSON(w, http.StatusOK, append(append(append(b, `,"backends":`...), backends...), "}\n"...))
		return
	}
	b := httperr.AppendOpen(nil, httperr.NotReady, "", "not ready: "+ready.Error())
	b = append(append(append(b, `},"backends":`...), backends...), "}\n"...)
	httperr.Send(w, httperr.NotReady, b)
}

// appendRestoring adds ,"restoring_partitions":[…] to a ready answer when this instance is
// restoring partitions while it serves (Config.Restoring): a rebalance assigned them after
// its first restore, and reads over them answer 503 or partial until they are done. And
// ,"restoring_limits":[…] for the partitions whose limiter state it restores meanwhile
// (Config.RestoringLimits).
func (s *Server) appendRestoring(b []byte) []byte {
	b = appendSome(b, `,"restoring_partitions":`, s.cfg.Restoring)
	return appendSome(b, `,"restoring_limits":`, s.cfg.RestoringLimits)
}

// appendSome adds name and list's partitions when list is set and names any.
func appendSome(b []byte, name string, list func() []int32) []byte {
	if list == nil {
		return b
	}
	ps := list()
	if len(ps) == 0 {
		return b
	}
	return appendPartitions(append(b, name...), ps)
}

// appendPartitions writes ps as a JSON array.
func appendPartitions(b []byte, ps []int32) []byte {
	b = append(b, '[')
	for i, p := range ps {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(p), 10)
	}
	return append(b, ']')
}
