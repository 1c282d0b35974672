// Package textparse reads the text that events and rows arrive in, for every reader of it:
// the event decoder (event), the batch readers (batch) and the /v1/allow body's fast path
// (limiter). It owns three things, so that they are written once and mean one thing.
//
// The JSON scanner. Scanner walks one flat JSON object member by member, scanning in place:
// field names are raw bytes compared exactly (no case folding, unlike encoding/json's struct
// matching), strings are validated with their escapes and found eight bytes at a time, and
// nested objects and arrays are validated to encoding/json's depth. It accepts exactly what
// encoding/json accepts as an object (plus NaN and Infinity tokens when asked, so a caller
// can refuse them by name), and converts nothing: a caller converts the members it keeps.
// Strings decode with Unquote as encoding/json decodes them; Lossy tells a caller for whom a
// string is an identity that encoding/json would rewrite it to U+FFFD, so that it can refuse
// it instead (the event decoder and the limiter refuse such keys). Repeated names are reported
// each time; batch keeps the last (as encoding/json), the event decoder and the limiter refuse a
// repeat of a field they read.
//
// Numbers. ParseFloat has strconv.ParseFloat's semantics and a fast path for the common
// shapes (Clinger's: an exact mantissa times an exact power of ten, the package's one pow10
// table); ParseInt and ParseUint take integers.
//
// Timestamps, one rule for every reader: a timestamp is either an integer count of unix
// milliseconds ([+-]digits within int64) or RFC 3339 text in its strict shape
// "2006-01-02T15:04:05[.frac](Z|±hh:mm)", read as time.Parse reads it (fields in range, the
// day valid for its month, offsets below 24 h, a fraction of any length truncated to the
// millisecond toward the past). There is no time.Parse fallback: the looser forms it also
// takes (one-digit fields, comma fractions, offsets of 24 h or more) are refused everywhere,
// since a timestamp that one reader takes and another refuses would make a replay through
// `slide batch` disagree with the stream. (Batch fell back to time.Parse before; ingest never
// did: the stricter rule was kept, and every time either took before in the strict shape
// reads the same.) Which JSON type may carry which form is the caller's: the event decoder
// takes unix ms as a JSON number and RFC 3339 as a JSON string; batch, whose CSV columns have
// no types, takes either form as text, quoted or not.
//
// Clip is how much of such text an error message quotes back (64 bytes and the length), for
// every package that echoes a client's or a file's input.
//
// Nothing here allocates on the common path, and nothing panics on any input: each parser
// has a fuzz target.
package textparse
