package query

// SetVisitHook makes every series a read of s visits call f, so tests count the work a
// read does and cancel a request in the middle of it. Set it before serving.
func SetVisitHook(s *Server, f func()) { s.visit = f }
