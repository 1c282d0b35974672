package query

// SetVisitHook makes every series a read of s visits call f, so tests count the work a
// read does and cancel a request in the middle of it. Set it before serving.
func SetVisitHook(s *Server, f func()) { s.visit = f }

// SetReadHook makes every scanning read of s call f as it begins, once it holds its read
// slot (Config.Reads), so tests hold a read without holding a lock of the store.
func SetReadHook(s *Server, f func()) { s.reading = f }
