//go:build !(linux || darwin || freebsd)

package batch

import "os"

// mapFile is not available here: files are streamed.
func mapFile(*os.File) (data []byte, unmap func(), ok bool) { return nil, nil, false }
